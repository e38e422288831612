// SPDX-License-Identifier: MIT
#pragma once
// The message of a typed error, for tests that check what an error says.
#include <string>

#include "core/error.hpp"

namespace fastmlip::test {

/// The message of the fastmlip::Error that f() throws, or "(no error)" when it throws none
/// (which no expected message contains, so a check for a phrase then fails).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace fastmlip::test
