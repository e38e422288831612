// SPDX-License-Identifier: MIT
#pragma once
/// \file torch's LayerNorm over the last dimension (biased variance, eps 1e-5), in place:
/// y <- gamma (y - mean) / sqrt(var + eps) + beta. CHGNet's gated-MLP norms and readout norm.
///
///   compute_layer_norm          y <- LN(y), keeping yhat = (y - mean) / sigma and 1/sigma
///   reverse_layer_norm          g <- dL/dy from g = dL/d LN(y), in place
///   reverse_layer_norm_weights  ggamma += sum_r g yhat, gbeta += sum_r g (before reverse_layer_norm)
///
/// Row by row (compute_row, reverse_row: plain loops) or over contiguous rows (compute_rows,
/// reverse_rows: SIMD for float and double, its row sums added in another order). S is float,
/// double or Dual<float / double>. The naive twin: reference/dense_ref.hpp.
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/impl/rows_impl.hpp"

namespace fastmlip::kernels {

template <class S>
struct LayerNorm {
  int dim = 0;
  std::vector<S> gamma, beta;
  static constexpr double kEps = 1e-5;

  /// One row: y <- LN(y); keeps the normalised row and 1/sigma for the reverse.
  void compute_row(S* y, S* yhat, S* inv_sigma) const {
    using std::sqrt;
    S mean = 0, var = 0;
    for (int j = 0; j < dim; ++j) mean += y[j];
    mean /= static_cast<S>(dim);
    for (int j = 0; j < dim; ++j) var += (y[j] - mean) * (y[j] - mean);
    var /= static_cast<S>(dim);
    const S inv = S(1) / sqrt(var + static_cast<S>(kEps));
    for (int j = 0; j < dim; ++j) {
      yhat[j] = (y[j] - mean) * inv;
      y[j] = yhat[j] * gamma[j] + beta[j];
    }
    *inv_sigma = inv;
  }
  /// compute_row over `rows` contiguous rows.
  void compute_rows(S* y, S* yhat, S* inv_sigma, int rows) const {
    rows::layer_norm_forward(y, yhat, inv_sigma, gamma.data(), beta.data(), rows, dim, kEps);
  }
  /// One row: g <- dL/dy from dL/d(LN(y)), in place.
  void reverse_row(S* g, const S* yhat, S inv_sigma) const {
    S m1 = 0, m2 = 0;
    for (int j = 0; j < dim; ++j) {
      g[j] *= gamma[j];
      m1 += g[j];
      m2 += g[j] * yhat[j];
    }
    m1 /= static_cast<S>(dim);
    m2 /= static_cast<S>(dim);
    for (int j = 0; j < dim; ++j) g[j] = inv_sigma * (g[j] - m1 - yhat[j] * m2);
  }
  /// reverse_row over `rows` contiguous rows.
  void reverse_rows(S* g, const S* yhat, const S* inv_sigma, int rows) const {
    rows::layer_norm_backward(g, yhat, inv_sigma, gamma.data(), rows, dim);
  }
  /// ggamma [dim] += sum_r g yhat, gbeta [dim] += sum_r g, with g = dL/d(LN(y)) as it is before
  /// reverse_rows / reverse_row overwrite it.
  void reverse_weights(const S* g, const S* yhat, int rows, S* ggamma, S* gbeta) const {
    for (int r = 0; r < rows; ++r) {
      const S* gr = g + static_cast<std::size_t>(r) * dim;
      const S* hr = yhat + static_cast<std::size_t>(r) * dim;
      for (int j = 0; j < dim; ++j) {
        ggamma[j] += gr[j] * hr[j];
        gbeta[j] += gr[j];
      }
    }
  }
};

}  // namespace fastmlip::kernels
