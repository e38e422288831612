// SPDX-License-Identifier: MIT
#pragma once
/// \file Radial and angular basis functions of MACE and CHGNet.
///
/// Radial (MACE: radial_embedding = basis x PolynomialCutoff; CHGNet: RadialBessel with smooth
/// cutoff): R_n(r) = b_n(r) f_p(r / r_max), n = 0..N-1, with
///
///   f_p(u) = 1 - (p+1)(p+2)/2 u^p + p(p+2) u^(p+1) - p(p+1)/2 u^(p+2)   for u < 1, else 0
///
/// and b_n one of mace-torch's three `radial_type`s (CHGNet has only the first):
///
///   Bessel     b_n(r) = c sin(w_n r) / r
///   Gaussian   b_n(r) = exp(gamma (r - mu_n)^2),  mu_n = n r_max / (N-1), gamma = -(N-1)^2 / (2 r_max^2)
///   Chebyshev  b_n(r) = T_(n+1)(r), the Chebyshev polynomial of the first kind at r itself (in A,
///              not scaled to [-1, 1]: mace-torch's ChebychevBasis), so it grows as r^(n+1)
///
/// Bessel, MACE: w_n = (n+1) pi / r_max, c = sqrt(2 / r_max), p = 5 or 6 (num_polynomial_cutoff).
/// CHGNet: w_n = f_n / r_cut with learnable frequencies f_n (initially (n+1) pi),
/// c = sqrt(2 / r_cut), p = 8, i.e. f = 1 - 45 u^8 + 80 u^9 - 36 u^10 (FastCHGNet eq. 12).
/// With a distance transform (distance_transform.hpp) b_n is evaluated at x(r), f_p at r.
///
/// Angular (CHGNet FourierExpansion of the bond angle theta, order K):
///
///   A(theta) = [1/sqrt(2), sin(k_1 theta) .. sin(k_K theta), cos(k_1 theta) .. cos(k_K theta)] / sqrt(pi)
///
/// Both are evaluated in one pass per edge (or angle). When the frequencies are harmonic
/// (w_n = (n+1) w_0, as in MACE and in CHGNet before training moves them), one sin and one cos
/// per edge feed the Chebyshev recurrence sin((n+1)a) = 2 cos(a) sin(na) - sin((n-1)a) instead
/// of N transcendental calls; the envelope's powers share u^(p-1) (FastCHGNet eq. 12-13).
#include <string>
#include <vector>

namespace fastmlip::kernels {

/// mace-torch's `radial_type`; CHGNet's basis is Bessel.
enum class RadialBasisKind { Bessel, Gaussian, Chebyshev };

/// Parameters of the radial basis. `frequencies` holds one constant per basis function, so
/// N = frequencies.size(): Bessel's w_n (1/A), Gaussian's centres mu_n (A), Chebyshev's orders
/// (1..N, mace-torch's buffer `n`).
struct RadialBasisParams {
  RadialBasisKind kind = RadialBasisKind::Bessel;
  std::vector<double> frequencies;
  double r_max = 5.0;           ///< cutoff radius (A)
  int envelope_p = 5;           ///< polynomial envelope exponent p >= 1
  double prefactor = 0.0;       ///< Bessel's c; 0 means the usual sqrt(2 / r_max)
  double gaussian_coeff = 0.0;  ///< Gaussian's gamma (1/A^2, negative)
  /// mace-torch's apply_cutoff. True (its default): out = b_n(x) f_p(r). False (MACE-OMOL's
  /// `apply_cutoff False`): out = b_n(x) alone; the model multiplies what it computes from the
  /// basis (the radial MLP's output, the Density term) by f_p(r) instead.
  bool apply_cutoff = true;

  /// MACE's BesselBasis: w_n = (n+1) pi / r_max.
  static RadialBasisParams mace(int num_basis, double r_max, int p);
  /// MACE's GaussianBasis (N >= 2): mu_n = n r_max / (N-1), gamma = -0.5 / (r_max / (N-1))^2.
  static RadialBasisParams gaussian(int num_basis, double r_max, int p);
  /// MACE's ChebychevBasis: orders 1..N.
  static RadialBasisParams chebyshev(int num_basis, double r_max, int p);
  /// CHGNet's RadialBessel: w_n = f_n / r_cut for the given frequencies f_n, p = 8.
  static RadialBasisParams chgnet(const std::vector<double>& frequencies_f, double r_cut);

  int num_basis() const noexcept { return static_cast<int>(frequencies.size()); }
  double c() const noexcept;
  /// mace-torch's name of the kind: "bessel", "gaussian" or "chebyshev".
  const char* name() const noexcept;
  /// Throws InputError naming the bad value (N < 1 or > kMaxRadialBasis, r_max <= 0, p < 1, a
  /// Gaussian coefficient that is not negative, Chebyshev orders other than 1..N).
  void validate() const;
  /// True for a Bessel basis with w_n = (n+1) w_0 to within a few ulps: the recurrence path is
  /// then exact.
  bool harmonic() const noexcept;
};

/// The radial_type named `name` ("bessel", "gaussian", "chebyshev"); InputError listing those
/// for any other.
RadialBasisKind radial_basis_kind(const std::string& name);

/// Parameters of the Fourier angle basis; output width is 1 + 2 K.
struct FourierParams {
  std::vector<double> frequencies;  ///< k_1..k_K (CHGNet: 1..K initially)
  static FourierParams chgnet(int order);
  int order() const noexcept { return static_cast<int>(frequencies.size()); }
  int width() const noexcept { return 1 + 2 * order(); }
  void validate() const;
  bool harmonic() const noexcept;  ///< k_j = j k_1
};

/// Largest N / K the kernels accept: bounds shared-memory staging on the GPU.
inline constexpr int kMaxRadialBasis = 32;
inline constexpr int kMaxFourierOrder = 32;

}  // namespace fastmlip::kernels
