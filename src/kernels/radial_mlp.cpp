// SPDX-License-Identifier: MIT
#include "kernels/radial_mlp.hpp"

#include <cmath>
#include <string>

#include "core/error.hpp"

namespace fastmlip::kernels {

void RadialMLP::validate() const {
  if (widths.size() < 2) {
    throw InputError("RadialMLP: needs at least an input and an output width");
  }
  for (std::size_t l = 0; l < widths.size(); ++l) {
    const int limit = (l == 0 || l + 1 == widths.size()) ? kMaxWidth : kMaxHidden;
    if (widths[l] < 1 || widths[l] > limit) {
      throw InputError("RadialMLP: width " + std::to_string(widths[l]) + " of layer " + std::to_string(l) +
                       " is outside 1.." + std::to_string(limit));
    }
  }
  if (weights.size() + 1 != widths.size()) {
    throw InputError("RadialMLP: " + std::to_string(weights.size()) + " weight matrices for " +
                     std::to_string(widths.size()) + " widths");
  }
  for (std::size_t l = 0; l < weights.size(); ++l) {
    const std::size_t expect = static_cast<std::size_t>(widths[l]) * widths[l + 1];
    if (weights[l].size() != expect) {
      throw InputError("RadialMLP: layer " + std::to_string(l) + " has " + std::to_string(weights[l].size()) +
                       " weights, expected " + std::to_string(widths[l]) + " x " + std::to_string(widths[l + 1]));
    }
  }
  if (!std::isfinite(act_cst) || act_cst <= 0) {
    throw InputError("RadialMLP: activation constant must be positive and finite");
  }
}

}  // namespace fastmlip::kernels
