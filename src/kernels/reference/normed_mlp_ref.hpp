// SPDX-License-Identifier: MIT
#pragma once
/// \file Naive reference of mace-torch's RadialMLP (normed_mlp.hpp): torch's Linear, LayerNorm and
/// SiLU as written, in double, one row at a time.
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/normed_mlp.hpp"
#include "kernels/reference/dense_ref.hpp"

namespace fastmlip::kernels::reference {

/// out [rows][width_out] = MLP(x [rows][width_in]) with pre [rows][width_first] (or empty) added
/// to the first pre-activation.
inline std::vector<double> compute_normed_mlp(const NormedMLP& mlp, const std::vector<double>& x,
                                              const std::vector<double>& pre, int rows) {
  std::vector<double> h = x;
  const int L = mlp.num_layers();
  for (int l = 0; l < L; ++l) {
    const int in = mlp.widths[l], out = mlp.widths[l + 1];
    std::vector<double> z(static_cast<std::size_t>(rows) * out);
    compute_dense(h.data(), rows, in, out, mlp.weight[l].data(), mlp.bias[l].data(), z.data());
    if (l == 0 && !pre.empty()) {
      for (std::size_t q = 0; q < z.size(); ++q) {
        z[q] += pre[q];
      }
    }
    if (l + 1 < L) {
      std::vector<double> n(z.size());
      compute_layer_norm(z.data(), rows, out, mlp.gamma[l].data(), mlp.beta[l].data(), 1e-5, n.data());
      for (std::size_t q = 0; q < n.size(); ++q) {
        z[q] = n[q] / (1.0 + std::exp(-n[q]));
      }
    }
    h = std::move(z);
  }
  return h;
}

}  // namespace fastmlip::kernels::reference
