// SPDX-License-Identifier: MIT
#include "kernels/distance_transform.hpp"

#include <cmath>

#include "core/error.hpp"

namespace fastmlip::kernels {

void DistanceTransformParams::validate(int num_elements) const {
  if (!active()) {
    return;
  }
  if (static_cast<int>(covalent_radii.size()) != num_elements) {
    throw InputError(std::string("distance transform ") + name() + ": " +
                     std::to_string(covalent_radii.size()) + " covalent radii for " +
                     std::to_string(num_elements) + " elements");
  }
  for (std::size_t i = 0; i < covalent_radii.size(); ++i) {
    if (!std::isfinite(covalent_radii[i]) || covalent_radii[i] <= 0.0) {
      throw InputError(std::string("distance transform ") + name() + ": the covalent radius of element " +
                       std::to_string(i) + " is " + std::to_string(covalent_radii[i]) +
                       "; it must be positive");
    }
  }
  if (kind == DistanceTransformKind::Soft) {
    if (!std::isfinite(alpha) || alpha <= 0.0) {
      throw InputError("distance transform Soft: alpha = " + std::to_string(alpha) +
                       "; it needs a finite, positive value");
    }
    return;
  }
  if (!std::isfinite(a) || !std::isfinite(q) || !std::isfinite(p) || a <= 0.0 || p <= q) {
    throw InputError("distance transform Agnesi: a = " + std::to_string(a) + ", q = " + std::to_string(q) +
                     ", p = " + std::to_string(p) + "; it needs finite values with a > 0 and p > q");
  }
}

}  // namespace fastmlip::kernels
