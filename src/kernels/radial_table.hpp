// SPDX-License-Identifier: MIT
#pragma once
/// \file MACE's radial function R(r) = MLP(b(r) f_p(r / r_max)), b the radial basis, tabulated as a cubic
/// Hermite spline, for inference.
///
/// In MACE the radial MLP sees only the edge length, so its whole output row (weight_numel
/// values, 512-1536 at MACE-MP shapes) is a smooth function of one scalar. Evaluating the MLP
/// costs ~40k multiply-adds per edge forward and as many again in reverse; the spline costs
/// 4 per output value. Knots r_k = r_lo + k h, k = 0..K, with r_K = r_max exactly; each knot
/// stores R(r_k) and h R'(r_k), both exact (the MLP is differentiated in forward mode in
/// double). On [r_k, r_k+1], t = (r - r_k) / h:
///
///   R(r)  = H00(t) R_k + H10(t) h R'_k + H01(t) R_k+1 + H11(t) h R'_k+1
///   H00 = 2t^3 - 3t^2 + 1,  H10 = t^3 - 2t^2 + t,  H01 = -2t^3 + 3t^2,  H11 = t^3 - t^2
///
/// and dR/dr is the derivative of that cubic, so forces are the exact gradient of the
/// tabulated energy (energy is conserved in NVE to the integrator's accuracy, not the
/// table's). The spline is C1; its error is O(h^4) in R and O(h^3) in R'. build() measures
/// both against the exact function at three points of every interval, including where each
/// error peaks (t = 1/2 for R, t = 1/2 -+ 1/sqrt(12) for R').
///
/// Beyond r_max R is zero (the envelope cuts it off). Below r_lo the table is not defined:
/// callers refuse such edges (the pair styles refuse atoms closer than 0.1 A anyway).
///
/// With a distance transform (Agnesi, Soft) the basis is read at x(r; r0), r0 set by the edge's
/// two elements, so R is a function of r for each pair of elements: one table per pair, all on
/// the same knots, and the kernels pick an edge's table by index (HermiteTable::edge_table).
/// The Density blocks' per-edge term tanh(d(r)^2) is tabulated the same way, width 1.
#include <functional>
#include <vector>

#include "kernels/distance_transform.hpp"
#include "kernels/normed_mlp.hpp"
#include "kernels/radial_basis.hpp"
#include "kernels/radial_mlp.hpp"

namespace fastmlip::kernels {

struct RadialTable {
  double r_lo = 0;    ///< first knot (A)
  double r_max = 0;   ///< last knot (A); R = 0 beyond
  double h = 0;       ///< knot spacing (A), (r_max - r_lo) / (knots - 1)
  int knots = 0;      ///< K + 1
  int width = 0;      ///< values per row (the MLP's output width)
  /// [knots][2][width]: R(r_k), then h R'(r_k).
  std::vector<double> data;

  /// Interpolation error measured at build time, over [r_lo, r_max]: the largest absolute
  /// error of any output value and of its derivative, and the largest |R| and |R'| there.
  double max_error_value = 0, max_error_derivative = 0;
  double max_abs_value = 0, max_abs_derivative = 0;

  /// Lowest r_lo build() accepts: below it sin(wr)/r and its derivative lose digits to
  /// cancellation.
  static constexpr double kMinRLo = 1e-3;
  /// Largest knot count: bounds the table's memory (2 x knots x width values).
  static constexpr int kMaxKnots = 1 << 20;

  /// Tabulates MLP(b(r) f_p) on [r_lo, basis.r_max] with spacing at most `spacing` (the
  /// spacing actually used divides the interval evenly). Throws InputError for spacing <= 0
  /// or too fine (over kMaxKnots knots), or r_lo outside [kMinRLo, r_max).
  static RadialTable build(const RadialBasisParams& basis, const RadialMLP& mlp, double spacing, double r_lo);

  /// f(r, value, derivative) writes `width` values of a function that vanishes with its
  /// derivative at r_max, and their derivatives; tabulated as above on [r_lo, r_max].
  using Function = std::function<void(double r, double* value, double* derivative)>;
  static RadialTable build(const Function& f, int width, double r_max, double spacing, double r_lo);

  /// Throws InputError if the sizes and bounds do not fit together.
  void validate() const;
};

/// The exact radial function and its derivative at one r in (0, r_max), in double:
/// value[j] = MLP(B(r))_j, derivative[j] = d/dr of it. Used to build tables and to test them.
void evaluate_radial_function(const RadialBasisParams& basis, const RadialMLP& mlp, double r, double* value,
                              double* derivative);

/// The edge's radial features and their r-derivatives, in double: b_n(x) f(r) with x = r, or
/// x = T(r; rsum) under an active transform (rsum: the two elements' covalent radii summed),
/// f the envelope (1 with apply_cutoff false). h and dh hold basis.num_basis() values.
void evaluate_radial_features(const RadialBasisParams& basis, const DistanceTransformParams& transform,
                              double rsum, double r, double* h, double* dh);

/// As evaluate_radial_function, for the edge of a pair of elements whose covalent radii sum to
/// rsum under `transform` (inactive: rsum is ignored).
void evaluate_radial_function(const RadialBasisParams& basis, const DistanceTransformParams& transform,
                              double rsum, const RadialMLP& mlp, double r, double* value, double* derivative);

/// A Density block's edge term tanh(d^2) (times f_p(r) with apply_cutoff false), d = the radial
/// features . w (w: num_basis weights, density_fn's), and its r-derivative.
void evaluate_density_term(const RadialBasisParams& basis, const DistanceTransformParams& transform,
                           double rsum, const std::vector<double>& w, double r, double* value,
                           double* derivative);

/// The non-linear block's MLPs (normed_mlp.hpp) on the edge's radial features, `pre` (the first
/// layer's species terms of the edge's pair, width_first values) added to the first
/// pre-activation; times f_p(r) with apply_cutoff false, as the exact path scales them. In
/// forward mode through the LayerNorms, in double.
void evaluate_normed_radial_function(const RadialBasisParams& basis, const DistanceTransformParams& transform,
                                     double rsum, const NormedMLP& mlp, const std::vector<double>& pre,
                                     double r, double* value, double* derivative);

/// The non-linear block's density term tanh(d^2) (times f_p(r) with apply_cutoff false), d its
/// density MLP's single output with `pre` as above, and its r-derivative.
void evaluate_normed_density_term(const RadialBasisParams& basis, const DistanceTransformParams& transform,
                                  double rsum, const NormedMLP& mlp, const std::vector<double>& pre, double r,
                                  double* value, double* derivative);

}  // namespace fastmlip::kernels
