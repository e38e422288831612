// SPDX-License-Identifier: MIT
#pragma once
/// \file Naive reference of the radial MLP: layer by layer, edge by edge, in double.
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/radial_mlp.hpp"

namespace fastmlip::kernels::reference {

inline double silu(double z) { return z / (1.0 + std::exp(-z)); }

template <class T>
void compute_radial_mlp(const RadialMLP& mlp, std::size_t edges, const T* in, T* out) {
  for (std::size_t e = 0; e < edges; ++e) {
    std::vector<double> h(in + e * mlp.width_in(), in + (e + 1) * mlp.width_in());
    for (int l = 0; l < mlp.num_layers(); ++l) {
      const int a = mlp.widths[l], b = mlp.widths[l + 1];
      std::vector<double> z(b, 0.0);
      for (int j = 0; j < b; ++j) {
        for (int i = 0; i < a; ++i) {
          z[j] += h[i] * mlp.weights[l][i * b + j];
        }
        z[j] /= std::sqrt(static_cast<double>(a));
        if (l + 1 < mlp.num_layers()) {
          z[j] = mlp.act_cst * silu(z[j]);
        }
      }
      h = std::move(z);
    }
    for (int j = 0; j < mlp.width_out(); ++j) {
      out[e * mlp.width_out() + j] = static_cast<T>(h[j]);
    }
  }
}

}  // namespace fastmlip::kernels::reference
