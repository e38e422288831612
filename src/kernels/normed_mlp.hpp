// SPDX-License-Identifier: MIT
#pragma once
/// \file mace-torch's RadialMLP (modules/radial.py; the radial and density MLPs of MACE-MH-1 /
/// OMOL's RealAgnosticResidualNonLinearInteractionBlock, after ESEN / FairChem):
///
///   h_0 = x;  z_l = h_l W_l^T + b_l (+ pre, first layer only);  h_{l+1} = silu(LN_l(z_l))
///   out = h_L W_L^T + b_L                                         (last layer: no norm, no SiLU)
///
/// torch's Linear (weight [out][in], bias) and LayerNorm (eps 1e-5, elementwise affine). `pre` is
/// a per-row term added to the first layer's pre-activation: the non-linear block's edge input is
/// [B_e, source embedding of the sender, target embedding of the receiver], whose last two parts
/// depend on the species only, so the caller forms their product with the first weight's columns
/// per species pair and this MLP sees the radial basis alone (first weight: its B columns).
/// Entry points: normed_mlp_kokkos.hpp. The naive twin: reference/normed_mlp_ref.hpp.
#include <string>
#include <vector>

#include "core/error.hpp"

namespace fastmlip::kernels {

struct NormedMLP {
  std::vector<int> widths;                       ///< n_0 .. n_L+1, at least two
  std::vector<std::vector<double>> weight;       ///< per layer, [n_{l+1}][n_l] (torch's layout)
  std::vector<std::vector<double>> bias;         ///< per layer, [n_{l+1}]
  std::vector<std::vector<double>> gamma, beta;  ///< per hidden layer (all but the last), [n_{l+1}]

  int num_layers() const { return static_cast<int>(widths.size()) - 1; }
  int width_in() const { return widths.front(); }
  int width_out() const { return widths.back(); }
  int width_first() const { return widths.at(1); }  ///< the pre-activation `pre` is added to

  /// Throws InputError naming the layer and the sizes on any mismatch.
  void validate() const {
    if (widths.size() < 2) {
      throw InputError("NormedMLP: needs at least an input and an output width");
    }
    for (int w : widths) {
      if (w < 1) {
        throw InputError("NormedMLP: width " + std::to_string(w) + " is not positive");
      }
    }
    const auto check = [](const std::vector<std::vector<double>>& v, std::size_t n, const char* what) {
      if (v.size() != n) {
        throw InputError(std::string("NormedMLP: ") + std::to_string(v.size()) + " " + what + " for " +
                         std::to_string(n) + " layers");
      }
    };
    const std::size_t L = widths.size() - 1;
    check(weight, L, "weights");
    check(bias, L, "biases");
    check(gamma, L - 1, "LayerNorm weights");
    check(beta, L - 1, "LayerNorm biases");
    for (std::size_t l = 0; l < L; ++l) {
      const auto n = static_cast<std::size_t>(widths[l + 1]);
      if (weight[l].size() != n * widths[l] || bias[l].size() != n ||
          (l + 1 < L && (gamma[l].size() != n || beta[l].size() != n))) {
        throw InputError("NormedMLP: layer " + std::to_string(l) + " is not Linear(" +
                         std::to_string(widths[l]) + ", " + std::to_string(n) + ") with a bias" +
                         (l + 1 < L ? " and LayerNorm" : ""));
      }
    }
  }
};

}  // namespace fastmlip::kernels
