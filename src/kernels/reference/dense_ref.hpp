// SPDX-License-Identifier: MIT
#pragma once
/// \file Naive references of the dense kernels (dense.hpp, layer_norm.hpp, gated_mlp.hpp): the
/// defining loops in double, torch's formulas as written (nn.Linear, nn.LayerNorm, chgnet's
/// GatedMLP), nothing merged, split or tiled.
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/gated_mlp.hpp"

namespace fastmlip::kernels::reference {

/// y [rows][out] = x [rows][in] W^T + b; W [out][in], b [out] or null.
template <class T>
void compute_dense(const T* x, int rows, int in, int out, const T* W, const T* b, T* y) {
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double s = b != nullptr ? double(b[o]) : 0.0;
      for (int i = 0; i < in; ++i) {
        s += double(x[static_cast<std::size_t>(r) * in + i]) * double(W[static_cast<std::size_t>(o) * in + i]);
      }
      y[static_cast<std::size_t>(r) * out + o] = static_cast<T>(s);
    }
  }
}

/// y [rows][dim] = LayerNorm(x) with torch's biased variance and eps.
template <class T>
void compute_layer_norm(const T* x, int rows, int dim, const T* gamma, const T* beta, double eps, T* y) {
  for (int r = 0; r < rows; ++r) {
    const T* xr = x + static_cast<std::size_t>(r) * dim;
    double mean = 0, var = 0;
    for (int j = 0; j < dim; ++j) mean += double(xr[j]);
    mean /= dim;
    for (int j = 0; j < dim; ++j) var += (double(xr[j]) - mean) * (double(xr[j]) - mean);
    var /= dim;
    for (int j = 0; j < dim; ++j) {
      y[static_cast<std::size_t>(r) * dim + j] =
          static_cast<T>((double(xr[j]) - mean) / std::sqrt(var + eps) * double(gamma[j]) + double(beta[j]));
    }
  }
}

/// y [rows][out] = silu(LN_1(core(z))) * sigmoid(LN_2(gate(z))), chgnet's GatedMLP.
template <class T>
void compute_gated_mlp(const GatedMlpWeights<T>& w, const T* z, int rows, T* y) {
  const int width = w.width(), out = w.out;
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  auto mlp = [&](const std::vector<T>& w1, const std::vector<T>& b1, const std::vector<T>& w2,
                 const std::vector<T>& b2, const std::vector<T>& ln_w, const std::vector<T>& ln_b) {
    std::vector<T> h(static_cast<std::size_t>(rows) * width), o(static_cast<std::size_t>(rows) * out);
    compute_dense(z, rows, w.in, width, w1.data(), b1.data(), h.data());
    if (w.hidden > 0) {
      for (auto& v : h) v = static_cast<T>(double(v) * sigmoid(double(v)));
      compute_dense(h.data(), rows, w.hidden, out, w2.data(), b2.data(), o.data());
    } else {
      o = h;
    }
    if (w.norm) {
      std::vector<T> n(o.size());
      compute_layer_norm(o.data(), rows, out, ln_w.data(), ln_b.data(), 1e-5, n.data());
      o = n;
    }
    return o;
  };
  const auto c = mlp(w.core1_w, w.core1_b, w.core2_w, w.core2_b, w.ln_core_w, w.ln_core_b);
  const auto g = mlp(w.gate1_w, w.gate1_b, w.gate2_w, w.gate2_b, w.ln_gate_w, w.ln_gate_b);
  for (std::size_t q = 0; q < c.size(); ++q) {
    const double cv = double(c[q]);
    y[q] = static_cast<T>(cv * sigmoid(cv) * sigmoid(double(g[q])));
  }
}

}  // namespace fastmlip::kernels::reference
