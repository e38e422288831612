// SPDX-License-Identifier: MIT
#pragma once
// The relative error of a whole array, as the numeric tests compare results.
#include <algorithm>
#include <cmath>
#include <limits>

namespace fastmlip::test {

/// max_i |a_i - b_i| / max(floor, max_i |b_i|), with b the reference: one scale for the whole
/// array, so that entries near zero are held to the array's magnitude rather than to their own.
/// The floor says what "small" is: 1 for energies and other O(1) physical quantities, a tiny
/// number (1e-300) where the array's own magnitude is the whole scale. A and B are anything with
/// data() and size() in host memory (std::vector, std::array, a Kokkos host view); arrays of
/// different sizes differ infinitely, so a length bug cannot pass.
template <class A, class B>
double rel_diff(const A& a, const B& b, double floor) {
  if (static_cast<std::size_t>(a.size()) != static_cast<std::size_t>(b.size())) {
    return std::numeric_limits<double>::infinity();
  }
  double diff = 0, scale = floor;
  for (std::size_t i = 0; i < static_cast<std::size_t>(b.size()); ++i) {
    const double x = static_cast<double>(a.data()[i]), y = static_cast<double>(b.data()[i]);
    diff = std::max(diff, std::abs(x - y));
    scale = std::max(scale, std::abs(y));
  }
  return diff / scale;
}

}  // namespace fastmlip::test
