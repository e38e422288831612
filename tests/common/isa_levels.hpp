// SPDX-License-Identifier: MIT
#pragma once
// What the tests of the run-time dispatched kernels (math/simd_kernels.hpp, kernels/*_simd.hpp)
// share: the instruction-set levels this build can run on this CPU, and their random inputs.
#include <random>
#include <vector>

#include "math/simd_kernels.hpp"

namespace fastmlip::test {

/// base, and avx2 / avx512 where this build has them and this CPU runs them.
inline std::vector<math::Isa> isa_levels() {
  std::vector<math::Isa> out;
  for (math::Isa isa : {math::Isa::base, math::Isa::avx2, math::Isa::avx512}) {
    if (math::isa_available(isa)) {
      out.push_back(isa);
    }
  }
  return out;
}

/// n values uniform in [lo, hi), from std::mt19937 seeded with `seed`.
template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) {
    x = static_cast<T>(d(rng));
  }
  return v;
}

}  // namespace fastmlip::test
