// SPDX-License-Identifier: MIT
#pragma once
/// \file MACE's radial MLP (conv_tp_weights): e3nn's FullyConnectedNet with SiLU.
///
///   h_0 = edge features;  h_{l+1} = cst * silu(h_l W_l / sqrt(n_l))  (hidden layers)
///   out = h_L W_L / sqrt(n_L)                                       (last layer, no activation)
///
/// W_l is [n_l, n_{l+1}], bias-free; cst = 1/sqrt(E[silu(z)^2]), z ~ N(0,1), is the constant of
/// e3nn's normalize2mom, taken from the model (it is a sampled estimate, so a recomputed value
/// would differ in the last digits).
#include <vector>

namespace fastmlip::kernels {

struct RadialMLP {
  std::vector<int> widths;                   ///< n_0 .. n_L+1, at least two
  std::vector<std::vector<double>> weights;  ///< per layer, [n_l, n_{l+1}] row-major, unscaled
  double act_cst = 1.0;

  int num_layers() const { return static_cast<int>(widths.size()) - 1; }
  int width_in() const { return widths.front(); }
  int width_out() const { return widths.back(); }
  /// Throws InputError naming the layer and sizes on any mismatch, or a width above kMaxWidth.
  void validate() const;
  static constexpr int kMaxWidth = 4096;  ///< the last layer is MACE's weight_numel
  static constexpr int kMaxHidden = 256;  ///< hidden widths (per-edge scratch)
};

}  // namespace fastmlip::kernels
