// SPDX-License-Identifier: MIT
#pragma once
/// \file Naive reference of the equivariant linear map: the defining triple loop.
#include <cstddef>

#include "kernels/linear.hpp"

namespace fastmlip::kernels::reference {

/// x: [nodes, dim_in], W: [num_sets, weight_numel], set: per node (null: set 0), out: [nodes, dim_out].
template <class T>
void compute_linear(const EquivariantLinear& lin, std::size_t nodes, const int* set, const T* W, const T* x, T* out) {
  const int din = lin.irreps_in.dim(), dout = lin.irreps_out.dim();
  for (std::size_t n = 0; n < nodes; ++n) {
    for (int c = 0; c < dout; ++c) {
      out[n * dout + c] = T(0);
    }
    const T* w = W + static_cast<std::size_t>(set ? set[n] : 0) * lin.weight_numel;
    for (const auto& ins : lin.instructions) {
      for (int v = 0; v < ins.mul_out; ++v) {
        for (int m = 0; m < ins.dim; ++m) {
          double s = 0;
          for (int u = 0; u < ins.mul_in; ++u) {
            s += double(w[ins.offset_weight + u * ins.mul_out + v]) * x[n * din + ins.offset_in + u * ins.dim + m];
          }
          out[n * dout + ins.offset_out + v * ins.dim + m] += static_cast<T>(ins.path_weight * s);
        }
      }
    }
  }
}

}  // namespace fastmlip::kernels::reference
