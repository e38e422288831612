// SPDX-License-Identifier: MIT
#pragma once
// The one tolerance table of the numeric tests, keyed by dtype, and shared test inputs.
#include <cstdint>
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

/// Deterministic uniform numbers in [lo, hi) (splitmix64), independent of the C++ library.
class Uniform {
 public:
  explicit Uniform(std::uint64_t seed) : m_s(seed) {}
  double operator()(double lo, double hi) {
    std::uint64_t z = (m_s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return lo + (hi - lo) * static_cast<double>(z >> 11) * 0x1.0p-53;
  }

 private:
  std::uint64_t m_s;
};

}  // namespace fastmlip::test
