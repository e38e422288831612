// SPDX-License-Identifier: MIT
#pragma once
// The one tolerance table of the numeric tests, keyed by dtype, and shared test inputs.
#include <cstdint>

#include "core/rng.hpp"
#include <vector>

namespace fastmlip::test {

template <class T>
struct Tolerance;
template <>
struct Tolerance<double> {
  static constexpr double kernel = 1e-12;  // fast kernel vs reference, relative to scale
  static constexpr double fd = 1e-6;       // analytic vs central finite difference
};
template <>
struct Tolerance<float> {
  static constexpr double kernel = 2e-5;
  static constexpr double fd = 1e-6;  // finite differences always run in double
};

/// Odd sizes, after kokkos-kernels: empty, one, a prime, and one large enough to matter.
inline const std::vector<int>& test_sizes() {
  static const std::vector<int> sizes{0, 1, 13, 1000};
  return sizes;
}

/// Deterministic uniform numbers in [lo, hi) from the project's portable stream, so a failing
/// randomised case replays on any machine.
class Uniform {
 public:
  explicit Uniform(std::uint64_t seed) : m_rng(seed) {}
  double operator()(double lo, double hi) { return m_rng.uniform(lo, hi); }

 private:
  Rng m_rng;
};

}  // namespace fastmlip::test
