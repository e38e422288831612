// SPDX-License-Identifier: MIT
#include "kernels/radial_table.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "kernels/reference/radial_basis_ref.hpp"

namespace fastmlip::kernels {

void evaluate_radial_features(const RadialBasisParams& basis, const DistanceTransformParams& transform,
                              double rsum, double r, double* h, double* dh) {
  double x = r, dxdr = 1.0;
  if (transform.active()) {
    impl::distance_transform(transform.constants(), r, rsum, x, dxdr);
  }
  const double f = reference::envelope(basis, r), df = reference::envelope_derivative(basis, r);
  for (int n = 0; n < basis.num_basis(); ++n) {
    double b, db;
    reference::basis_function(basis, n, x, b, db);
    h[n] = b * f;
    dh[n] = db * dxdr * f + b * df;
  }
}

namespace {

/// Multiplies value and derivative by f_p(r), for apply_cutoff false, where the envelope
/// multiplies the output instead of the basis.
void apply_output_cutoff(const RadialBasisParams& basis, double r, std::size_t n, double* value,
                         double* derivative) {
  if (basis.apply_cutoff) {
    return;
  }
  const double f = reference::polynomial_cutoff(basis, r),
               df = reference::polynomial_cutoff_derivative(basis, r);
  for (std::size_t j = 0; j < n; ++j) {
    derivative[j] = derivative[j] * f + value[j] * df;
    value[j] *= f;
  }
}

/// tanh(d^2) and its r-derivative from d and dd/dr, times f_p(r) with apply_cutoff false.
void density_term(const RadialBasisParams& basis, double r, double d, double dd, double* value,
                  double* derivative) {
  const double th = std::tanh(d * d);
  value[0] = th;
  derivative[0] = (1 - th * th) * 2 * d * dd;
  apply_output_cutoff(basis, r, 1, value, derivative);
}

}  // namespace

void evaluate_radial_function(const RadialBasisParams& basis, const DistanceTransformParams& transform,
                              double rsum, const RadialMLP& mlp, double r, double* value,
                              double* derivative) {
  // Forward mode: every activation carries its derivative with respect to r alongside.
  const int N = basis.num_basis();
  std::vector<double> h(N), dh(N);
  evaluate_radial_features(basis, transform, rsum, r, h.data(), dh.data());
  for (int l = 0; l < mlp.num_layers(); ++l) {
    const int a = mlp.widths[l], b = mlp.widths[l + 1];
    const double scale = 1.0 / std::sqrt(static_cast<double>(a));
    const bool last = l + 1 == mlp.num_layers();
    std::vector<double> z(b, 0.0), dz(b, 0.0);
    for (int i = 0; i < a; ++i) {
      const double* W = &mlp.weights[l][static_cast<std::size_t>(i) * b];
      for (int j = 0; j < b; ++j) {
        z[j] += h[i] * W[j];
        dz[j] += dh[i] * W[j];
      }
    }
    for (int j = 0; j < b; ++j) {
      z[j] *= scale;
      dz[j] *= scale;
      if (!last) {
        const double sg = 1.0 / (1.0 + std::exp(-z[j]));
        const double act = z[j] * sg, dact = sg * (1.0 + z[j] * (1.0 - sg));
        z[j] = mlp.act_cst * act;
        dz[j] = mlp.act_cst * dact * dz[j];
      }
    }
    h = std::move(z);
    dh = std::move(dz);
  }
  apply_output_cutoff(basis, r, h.size(), h.data(), dh.data());
  std::copy(h.begin(), h.end(), value);
  std::copy(dh.begin(), dh.end(), derivative);
}

void evaluate_radial_function(const RadialBasisParams& basis, const RadialMLP& mlp, double r, double* value,
                              double* derivative) {
  evaluate_radial_function(basis, DistanceTransformParams{}, 0.0, mlp, r, value, derivative);
}

void evaluate_density_term(const RadialBasisParams& basis, const DistanceTransformParams& transform,
                           double rsum, const std::vector<double>& w, double r, double* value,
                           double* derivative) {
  const int N = basis.num_basis();
  if (static_cast<int>(w.size()) != N) {
    throw InputError("evaluate_density_term: " + std::to_string(w.size()) + " density weights for " +
                     std::to_string(N) + " radial features");
  }
  std::vector<double> h(N), dh(N);
  evaluate_radial_features(basis, transform, rsum, r, h.data(), dh.data());
  double d = 0, dd = 0;
  for (int n = 0; n < N; ++n) {
    d += h[n] * w[n];
    dd += dh[n] * w[n];
  }
  density_term(basis, r, d, dd, value, derivative);
}

namespace {

/// out = MLP(h) and its r-derivative, h and dh the radial features and theirs (normed_mlp.hpp):
/// z = h W^T + b (+ pre first); LayerNorm y = (z - mean) / sqrt(var + eps) gamma + beta, its
/// tangent dy = (dc s + c ds) gamma with c = z - mean, s = (var + eps)^-1/2, ds = -s^3 mean(c dc);
/// SiLU; the last layer linear.
void normed_mlp_forward_mode(const NormedMLP& mlp, const std::vector<double>& pre, std::vector<double> h,
                             std::vector<double> dh, std::vector<double>& out, std::vector<double>& dout) {
  mlp.validate();
  if (!pre.empty() && static_cast<int>(pre.size()) != mlp.width_first()) {
    throw InputError("NormedMLP tables: " + std::to_string(pre.size()) +
                     " first-layer species terms for width " + std::to_string(mlp.width_first()));
  }
  const int L = mlp.num_layers();
  for (int l = 0; l < L; ++l) {
    const int in = mlp.widths[l], n = mlp.widths[l + 1];
    std::vector<double> z(n), dz(n, 0.0);
    for (int j = 0; j < n; ++j) {
      const double* W = &mlp.weight[l][static_cast<std::size_t>(j) * in];
      double acc = mlp.bias[l][j] + (l == 0 && !pre.empty() ? pre[j] : 0.0), dacc = 0;
      for (int i = 0; i < in; ++i) {
        acc += h[i] * W[i];
        dacc += dh[i] * W[i];
      }
      z[j] = acc;
      dz[j] = dacc;
    }
    if (l + 1 < L) {
      double mean = 0, dmean = 0;
      for (int j = 0; j < n; ++j) {
        mean += z[j];
        dmean += dz[j];
      }
      mean /= n;
      dmean /= n;
      double var = 0, cdc = 0;
      for (int j = 0; j < n; ++j) {
        var += (z[j] - mean) * (z[j] - mean);
        cdc += (z[j] - mean) * (dz[j] - dmean);
      }
      var /= n;
      cdc /= n;
      const double s = 1.0 / std::sqrt(var + 1e-5), ds = -s * s * s * cdc;
      for (int j = 0; j < n; ++j) {
        const double c = z[j] - mean, dc = dz[j] - dmean;
        const double y = c * s * mlp.gamma[l][j] + mlp.beta[l][j];
        const double dy = (dc * s + c * ds) * mlp.gamma[l][j];
        const double sg = 1.0 / (1.0 + std::exp(-y));
        z[j] = y * sg;
        dz[j] = sg * (1.0 + y * (1.0 - sg)) * dy;
      }
    }
    h = std::move(z);
    dh = std::move(dz);
  }
  out = std::move(h);
  dout = std::move(dh);
}

/// The MLP of the radial features at r (their r-derivatives carried along): what both normed
/// tables evaluate before their own output step.
void normed_mlp_of_r(const RadialBasisParams& basis, const DistanceTransformParams& transform, double rsum,
                     const NormedMLP& mlp, const std::vector<double>& pre, double r, std::vector<double>& out,
                     std::vector<double>& dout) {
  const int N = basis.num_basis();
  std::vector<double> h(N), dh(N);
  evaluate_radial_features(basis, transform, rsum, r, h.data(), dh.data());
  normed_mlp_forward_mode(mlp, pre, std::move(h), std::move(dh), out, dout);
}

}  // namespace

void evaluate_normed_radial_function(const RadialBasisParams& basis, const DistanceTransformParams& transform,
                                     double rsum, const NormedMLP& mlp, const std::vector<double>& pre,
                                     double r, double* value, double* derivative) {
  const int N = basis.num_basis();
  if (mlp.width_in() != N) {
    throw InputError("NormedMLP tables: the MLP takes " + std::to_string(mlp.width_in()) +
                     " radial features, the basis has " + std::to_string(N));
  }
  std::vector<double> out, dout;
  normed_mlp_of_r(basis, transform, rsum, mlp, pre, r, out, dout);
  apply_output_cutoff(basis, r, out.size(), out.data(), dout.data());
  std::copy(out.begin(), out.end(), value);
  std::copy(dout.begin(), dout.end(), derivative);
}

void evaluate_normed_density_term(const RadialBasisParams& basis, const DistanceTransformParams& transform,
                                  double rsum, const NormedMLP& mlp, const std::vector<double>& pre, double r,
                                  double* value, double* derivative) {
  const int N = basis.num_basis();
  if (mlp.width_in() != N || mlp.width_out() != 1) {
    throw InputError("NormedMLP density tables: need " + std::to_string(N) +
                     " inputs and one output, the MLP has " + std::to_string(mlp.width_in()) + " and " +
                     std::to_string(mlp.width_out()));
  }
  std::vector<double> out, dout;
  normed_mlp_of_r(basis, transform, rsum, mlp, pre, r, out, dout);
  density_term(basis, r, out[0], dout[0], value, derivative);
}

void RadialTable::validate() const {
  if (width < 1 || knots < 2 || knots > kMaxKnots) {
    throw InputError("RadialTable: " + std::to_string(knots) + " knots of width " + std::to_string(width) +
                     "; need 2.." + std::to_string(kMaxKnots) + " knots and width >= 1");
  }
  if (!(r_lo >= kMinRLo) || !(r_max > r_lo) || !std::isfinite(r_max) || !(h > 0)) {
    throw InputError("RadialTable: need " + std::to_string(kMinRLo) + " <= r_lo < r_max and h > 0, got r_lo " +
                     std::to_string(r_lo) + ", r_max " + std::to_string(r_max) + ", h " + std::to_string(h));
  }
  if (std::abs(r_lo + (knots - 1) * h - r_max) > 1e-9 * r_max) {
    throw InputError("RadialTable: the knots do not end at r_max");
  }
  if (data.size() != 2 * static_cast<std::size_t>(knots) * width) {
    throw InputError("RadialTable: data holds " + std::to_string(data.size()) + " values, expected 2 x " +
                     std::to_string(knots) + " x " + std::to_string(width));
  }
}

RadialTable RadialTable::build(const RadialBasisParams& basis, const RadialMLP& mlp, double spacing,
                               double r_lo) {
  basis.validate();
  mlp.validate();
  if (mlp.width_in() != basis.num_basis()) {
    throw InputError("RadialTable: the MLP takes " + std::to_string(mlp.width_in()) +
                     " inputs but the basis has " + std::to_string(basis.num_basis()) + " functions");
  }
  return build([&](double r, double* v, double* d) { evaluate_radial_function(basis, mlp, r, v, d); },
               mlp.width_out(), basis.r_max, spacing, r_lo);
}

RadialTable RadialTable::build(const Function& f, int width, double r_max, double spacing, double r_lo) {
  if (width < 1 || !(r_max > 0) || !std::isfinite(r_max)) {
    throw InputError("RadialTable: need a width >= 1 and a finite r_max > 0, got " + std::to_string(width) +
                     " and " + std::to_string(r_max));
  }
  if (!(spacing > 0) || !std::isfinite(spacing)) {
    throw InputError("RadialTable: the knot spacing must be a positive length in Angstrom, got " +
                     std::to_string(spacing));
  }
  if (!(r_lo >= kMinRLo) || !(r_lo < r_max)) {
    throw InputError("RadialTable: the table's lower end r_lo = " + std::to_string(r_lo) +
                     " A must lie in [" + std::to_string(kMinRLo) + ", r_max = " + std::to_string(r_max) +
                     ")");
  }
  const double intervals = std::ceil((r_max - r_lo) / spacing - 1e-9);
  if (intervals + 1 > kMaxKnots) {
    throw InputError("RadialTable: spacing " + std::to_string(spacing) + " A needs " +
                     std::to_string(static_cast<long long>(intervals) + 1) + " knots on [" +
                     std::to_string(r_lo) + ", " + std::to_string(r_max) + "]; at most " +
                     std::to_string(kMaxKnots) + " are supported, so use a coarser spacing");
  }
  RadialTable t;
  t.r_lo = r_lo;
  t.r_max = r_max;
  t.knots = static_cast<int>(intervals) + 1;
  t.h = (t.r_max - t.r_lo) / (t.knots - 1);
  t.width = width;
  const std::size_t W = static_cast<std::size_t>(t.width);
  t.data.assign(2 * static_cast<std::size_t>(t.knots) * W, 0.0);
  std::vector<double> v(W), d(W);
  for (int k = 0; k < t.knots; ++k) {
    // The last knot is r_max itself, where R and R' are zero (the envelope and its first
    // derivative vanish at u = 1 and the MLP maps 0 to 0; tanh(0) = 0 for the density),
    // matching R = 0 beyond it.
    const double r = k + 1 == t.knots ? t.r_max : t.r_lo + k * t.h;
    f(r, v.data(), d.data());
    for (std::size_t j = 0; j < W; ++j) {
      t.data[(2 * static_cast<std::size_t>(k)) * W + j] = v[j];
      t.data[(2 * static_cast<std::size_t>(k) + 1) * W + j] = t.h * d[j];
    }
  }
  // Measure the interpolation error where each peaks: the leading error term of R is
  // proportional to t^2 (1-t)^2 (largest at t = 1/2), that of R' to its derivative (largest
  // at t = 1/2 -+ 1/sqrt(12)).
  const double ts[3] = {0.5 - 1.0 / std::sqrt(12.0), 0.5, 0.5 + 1.0 / std::sqrt(12.0)};
  for (int k = 0; k + 1 < t.knots; ++k) {
    const double* y0 = &t.data[2 * static_cast<std::size_t>(k) * W];
    const double* m0 = y0 + W;
    const double* y1 = m0 + W;
    const double* m1 = y1 + W;
    for (double s : ts) {
      const double r = t.r_lo + (k + s) * t.h;
      f(r, v.data(), d.data());
      const double s2 = s * s, s3 = s2 * s;
      const double h00 = 2 * s3 - 3 * s2 + 1, h10 = s3 - 2 * s2 + s, h01 = -2 * s3 + 3 * s2, h11 = s3 - s2;
      const double g00 = 6 * s2 - 6 * s, g10 = 3 * s2 - 4 * s + 1, g01 = -6 * s2 + 6 * s, g11 = 3 * s2 - 2 * s;
      for (std::size_t j = 0; j < W; ++j) {
        const double val = h00 * y0[j] + h10 * m0[j] + h01 * y1[j] + h11 * m1[j];
        const double der = (g00 * y0[j] + g10 * m0[j] + g01 * y1[j] + g11 * m1[j]) / t.h;
        t.max_error_value = std::max(t.max_error_value, std::abs(val - v[j]));
        t.max_error_derivative = std::max(t.max_error_derivative, std::abs(der - d[j]));
        t.max_abs_value = std::max(t.max_abs_value, std::abs(v[j]));
        t.max_abs_derivative = std::max(t.max_abs_derivative, std::abs(d[j]));
      }
    }
  }
  t.validate();
  return t;
}

}  // namespace fastmlip::kernels
