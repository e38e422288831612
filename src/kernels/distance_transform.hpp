// SPDX-License-Identifier: MIT
#pragma once
/// \file mace-torch's distance transforms (RadialEmbeddingBlock's `distance_transform`, used by
/// MACE-MP-0b3, MPA-0, OMAT-0 and MATPES): the radial basis of an edge u -> v is evaluated at
/// x = T(r; r0) instead of r, while the cutoff envelope stays at r. r0 depends on the edge's two
/// elements through their covalent radii.
///
/// Agnesi (ACEpotentials' transform; r0 = (R_u + R_v) / 2, s = r / r0):
///
///   x = 1 / (1 + a s^q / (1 + s^(q - p)))
///   dx/dr = -x^2 (a s^q / s) (q + p s^(q - p)) / (1 + s^(q - p))^2 / r0
///
/// x falls from 1 at r = 0 towards 0, so the basis sees short bonds spread out and long ones
/// compressed. The element-dependent r0 makes the radial MLP's input a function of the pair,
/// not of r alone: the `radial spline` tables (one function of r per layer) do not apply.
#include <cmath>
#include <string>
#include <vector>

#include "core/host_device.hpp"

namespace fastmlip::kernels {

enum class DistanceTransformKind { None, Agnesi };

struct DistanceTransformParams {
  DistanceTransformKind kind = DistanceTransformKind::None;
  double a = 0.0, q = 0.0, p = 0.0;    ///< Agnesi's constants (mace-torch: 1.0805, 0.9183, 4.5791)
  std::vector<double> covalent_radii;  ///< per model element (species index), A

  bool active() const noexcept { return kind != DistanceTransformKind::None; }
  /// "None" or "Agnesi", as mace-torch names them.
  const char* name() const noexcept { return kind == DistanceTransformKind::Agnesi ? "Agnesi" : "None"; }
  /// Throws InputError naming the bad value: a radius per element, each positive and finite, and
  /// Agnesi's a, q, p finite with a > 0 and p > q (else x is not a decreasing function of r).
  void validate(int num_elements) const;
};

namespace impl {

/// x = T(r) and dx/dr for one edge; r0 = (R_u + R_v) / 2, r > 0. The constants C are plain
/// numbers (T may be a Dual, for the trainer's double backward: then dx/dr carries its tangent).
/// std::pow is a device function under nvcc too; a Dual finds its own pow by argument lookup.
template <class T, class C>
FASTMLIP_HOST_DEVICE inline void agnesi_transform(T r, T r0, C a, C q, C p, T& x, T& dxdr) {
  using std::pow;
  const T s = r / r0;
  const T sq = pow(s, q), sqp = pow(s, q - p);
  const T den = T(1) + sqp;
  x = T(1) / (T(1) + a * sq / den);
  dxdr = -x * x * (a * sq / s) * (q + p * sqp) / (den * den) / r0;
}

}  // namespace impl
}  // namespace fastmlip::kernels
