// SPDX-License-Identifier: MIT
#pragma once
// A radial MLP of given widths with weights uniform in [-1.5, 1.5), for kernel tests.
#include <cstdint>
#include <vector>

#include "kernels/radial_mlp.hpp"
#include "tolerance.hpp"

namespace fastmlip::test {

inline kernels::RadialMLP random_radial_mlp(std::vector<int> widths, double act_cst, std::uint64_t seed) {
  kernels::RadialMLP mlp;
  mlp.widths = std::move(widths);
  mlp.act_cst = act_cst;
  Uniform w(seed);
  for (std::size_t l = 0; l + 1 < mlp.widths.size(); ++l) {
    mlp.weights.emplace_back(static_cast<std::size_t>(mlp.widths[l]) * mlp.widths[l + 1]);
    for (double& x : mlp.weights.back()) {
      x = w(-1.5, 1.5);
    }
  }
  return mlp;
}

}  // namespace fastmlip::test
