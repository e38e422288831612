// SPDX-License-Identifier: MIT
#pragma once
/// \file A dense layer, torch's nn.Linear: y = x W^T + b over rows (CHGNet's embeddings, bond
/// weights, convolution outputs and readout; the gated MLPs' layers, gated_mlp.hpp).
///
///   compute_dense           y (+)= x W^T + b
///   reverse_dense           gx (+)= gy W
///   reverse_dense_weights   gW += gy^T x,  gb += sum_r gy
///
/// The weight is kept twice, transposed ([in][out]) for compute and as stored ([out][in]) for
/// the input gradient, so both are the same row-major product (the SIMD GEMM). S is float,
/// double or Dual<float / double> (impl/rows_impl.hpp). The naive twin:
/// reference/dense_ref.hpp.
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/impl/rows_impl.hpp"

namespace fastmlip::kernels {

template <class S>
struct Dense {
  int in = 0, out = 0;
  std::vector<S> wt;  ///< [in][out]
  std::vector<S> w;   ///< [out][in], torch's layout
  std::vector<S> b;   ///< [out], or empty: no bias

  Dense() = default;
  /// From torch's layout: weight [out][in], bias [out] (null: none).
  Dense(int in_, int out_, const S* weight, const S* bias) : in(in_), out(out_) {
    if (in < 0 || out < 0) {
      throw InputError("Dense: negative shape [" + std::to_string(out) + ", " + std::to_string(in) + "]");
    }
    w.assign(weight, weight + static_cast<std::size_t>(in) * out);
    wt.resize(w.size());
    for (int o = 0; o < out; ++o) {
      for (int i = 0; i < in; ++i) {
        wt[static_cast<std::size_t>(i) * out + o] = w[static_cast<std::size_t>(o) * in + i];
      }
    }
    if (bias != nullptr) {
      b.assign(bias, bias + out);
    }
  }

  /// y = x W^T + b, or y += x W^T with `accumulate` (the bias is then not added); x rows at
  /// stride ldx, y rows at stride ldy.
  void compute(const S* x, int rows, int ldx, S* y, int ldy, bool accumulate = false) const {
    rows::gemm(x, rows, ldx, in, wt.data(), out, y, ldy, accumulate,
               accumulate || b.empty() ? static_cast<const S*>(nullptr) : b.data());
  }
  /// gx (+)= gy W.
  void reverse(const S* gy, int rows, int ldy, S* gx, int ldx, bool accumulate) const {
    rows::gemm(gy, rows, ldy, out, w.data(), in, gx, ldx, accumulate, static_cast<const S*>(nullptr));
  }
  /// gw [out][in] += gy^T x; gb [out] += column sums of gy (gb null: no bias).
  void reverse_weights(const S* x, int ldx, const S* gy, int ldy, int rows, S* gw, S* gb) const {
    rows::add_outer(gy, ldy, x, ldx, rows, out, in, gw);
    if (gb != nullptr) {
      rows::add_column_sums(gy, ldy, rows, out, gb);
    }
  }
};

}  // namespace fastmlip::kernels
