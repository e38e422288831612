// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include "core/elements.hpp"
#include "core/error.hpp"

namespace fastmlip {
namespace {

TEST(Elements, RoundTripsEveryElement) {
  for (int z = 1; z <= kMaxAtomicNumber; ++z) {
    EXPECT_EQ(atomic_number(element_symbol(z)), z);
  }
  EXPECT_EQ(atomic_number("Cu"), 29);
  EXPECT_EQ(atomic_number("Ni"), 28);
  EXPECT_EQ(element_symbol(8), "O");
}

TEST(Elements, RejectsNonElements) {
  EXPECT_EQ(atomic_number(""), 0);
  EXPECT_EQ(atomic_number("CU"), 0);  // case-sensitive, as ASE and LAMMPS
  EXPECT_EQ(atomic_number("Xx"), 0);
  EXPECT_THROW(element_symbol(0), InputError);
  EXPECT_THROW(element_symbol(119), InputError);
}

}  // namespace
}  // namespace fastmlip
