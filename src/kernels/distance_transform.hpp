// SPDX-License-Identifier: MIT
#pragma once
/// \file mace-torch's distance transforms (RadialEmbeddingBlock's `distance_transform`, used by
/// MACE-MP-0b3, MPA-0, OMAT-0 and MATPES): the radial basis of an edge u -> v is evaluated at
/// x = T(r; r0) instead of r, while the cutoff envelope stays at r. r0 depends on the edge's two
/// elements through their covalent radii R_u, R_v (ASE's, as the model holds them).
///
/// Agnesi (ACEpotentials' transform; r0 = (R_u + R_v) / 2, s = r / r0):
///
///   x = 1 / (1 + a s^q / (1 + s^(q - p)))
///   dx/dr = -x^2 (a s^q / s) (q + p s^(q - p)) / (1 + s^(q - p))^2 / r0
///
/// x falls from 1 at r = 0 towards 0, so the basis sees short bonds spread out and long ones
/// compressed.
///
/// Soft (mace-torch's SoftTransform; r0 = R_u + R_v, the sum, p0 = 3/4 r0, p1 = 4/3 r0,
/// m = (p0 + p1) / 2, k = alpha / (p1 - p0)):
///
///   s = (1 + tanh(k (r - m))) / 2,  x = p0 + (r - p0) s
///   dx/dr = s + (r - p0) k (1 - tanh^2) / 2
///
/// x stays near p0 for bonds much shorter than r0 and follows r for longer ones.
///
/// The element-dependent r0 makes the radial MLP's input a function of the pair, not of r
/// alone: `radial spline` builds one table per pair of elements (radial_table.hpp).
#include <cmath>
#include <string>
#include <vector>

#include "core/host_device.hpp"

namespace fastmlip::kernels {

enum class DistanceTransformKind { None, Agnesi, Soft };

/// The transform's plain numbers, as a kernel takes them (copyable to a device).
struct DistanceTransformConstants {
  DistanceTransformKind kind = DistanceTransformKind::None;
  double a = 0.0, q = 0.0, p = 0.0;  ///< Agnesi's
  double alpha = 0.0;                ///< Soft's steepness
};

struct DistanceTransformParams {
  DistanceTransformKind kind = DistanceTransformKind::None;
  double a = 0.0, q = 0.0, p = 0.0;    ///< Agnesi's constants (mace-torch: 1.0805, 0.9183, 4.5791)
  double alpha = 0.0;                  ///< Soft's (mace-torch: 4)
  std::vector<double> covalent_radii;  ///< per model element (species index), A

  bool active() const noexcept { return kind != DistanceTransformKind::None; }
  /// "None", "Agnesi" or "Soft", as mace-torch names them.
  const char* name() const noexcept {
    return kind == DistanceTransformKind::Agnesi ? "Agnesi"
           : kind == DistanceTransformKind::Soft ? "Soft"
                                                 : "None";
  }
  DistanceTransformConstants constants() const noexcept { return {kind, a, q, p, alpha}; }
  /// Throws InputError naming the bad value: a radius per element, each positive and finite;
  /// Agnesi's a, q, p finite with a > 0 and p > q (else x is not a decreasing function of r);
  /// Soft's alpha finite and positive.
  void validate(int num_elements) const;
};

namespace impl {

/// Agnesi: x = T(r) and dx/dr for one edge; r0 = (R_u + R_v) / 2, r > 0. The constants C are plain
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

/// Soft: x = T(r) and dx/dr for one edge; r0 = R_u + R_v.
template <class T, class C>
FASTMLIP_HOST_DEVICE inline void soft_transform(T r, T r0, C alpha, T& x, T& dxdr) {
  using std::tanh;
  const T p0 = T(0.75) * r0, p1 = T(4.0 / 3.0) * r0;
  const T m = T(0.5) * (p0 + p1), k = alpha / (p1 - p0);
  const T t = tanh(k * (r - m));
  const T s = T(0.5) * (T(1) + t);
  x = p0 + (r - p0) * s;
  dxdr = s + (r - p0) * T(0.5) * k * (T(1) - t * t);
}

/// The active transform of one edge whose elements' covalent radii sum to `rsum`.
template <class T>
FASTMLIP_HOST_DEVICE inline void distance_transform(const DistanceTransformConstants& c, T r, T rsum, T& x,
                                                    T& dxdr) {
  if (c.kind == DistanceTransformKind::Soft) {
    soft_transform(r, rsum, c.alpha, x, dxdr);
  } else {
    agnesi_transform(r, T(0.5) * rsum, c.a, c.q, c.p, x, dxdr);
  }
}

}  // namespace impl
}  // namespace fastmlip::kernels
