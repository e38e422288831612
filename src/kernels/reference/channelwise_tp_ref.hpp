// SPDX-License-Identifier: MIT
#pragma once
/// \file Naive reference of the channelwise tensor product: dense 3j blocks, the per-edge
/// message tensor materialised, then a scatter-sum over receivers. Everything the fused
/// kernels avoid, kept obvious on purpose.
#include <cstddef>
#include <vector>

#include "kernels/channelwise_tp.hpp"

namespace fastmlip::kernels::reference {

/// out[n, :] = sum over edges e with receiver[e] == n of TP(x[sender[e]], Y[e], w[e]).
/// x: [num_nodes, dim1], Y: [E, dim2], w: [E, weight_numel], out: [num_nodes, dim_out].
template <class T>
void compute_channelwise_tp(const ChannelwiseTP& tp, std::size_t num_nodes, std::size_t num_edges, const int* sender,
                            const int* receiver, const T* x, const T* Y, const T* w, T* out) {
  const int d1 = tp.dim1(), d2 = tp.dim2(), dw = tp.weight_numel, dout = tp.dim_out();
  std::vector<double> messages(num_edges * dout, 0.0);
  const CGTable table = CGTable::build(kMaxL);
  for (std::size_t e = 0; e < num_edges; ++e) {
    for (const auto& ins : tp.instructions) {
      const std::vector<double> C = table.dense(ins.l1, ins.l2, ins.l3);
      const int n1 = 2 * ins.l1 + 1, n2 = 2 * ins.l2 + 1, n3 = 2 * ins.l3 + 1;
      for (int u = 0; u < ins.mul; ++u) {
        for (int i = 0; i < n1; ++i) {
          for (int j = 0; j < n2; ++j) {
            for (int k = 0; k < n3; ++k) {
              messages[e * dout + ins.offset_out + u * n3 + k] +=
                  ins.coefficient * C[(i * n2 + j) * n3 + k] * w[e * dw + ins.offset_weight + u] *
                  x[sender[e] * d1 + ins.offset1 + u * n1 + i] * Y[e * d2 + ins.offset2 + j];
            }
          }
        }
      }
    }
  }
  for (std::size_t i = 0; i < num_nodes * dout; ++i) {
    out[i] = T(0);
  }
  for (std::size_t e = 0; e < num_edges; ++e) {
    for (int c = 0; c < dout; ++c) {
      out[receiver[e] * dout + c] += static_cast<T>(messages[e * dout + c]);
    }
  }
}

/// Gradients of sum(out * grad_out) with respect to x, Y and w (each overwritten).
template <class T>
void reverse_channelwise_tp(const ChannelwiseTP& tp, std::size_t num_nodes, std::size_t num_edges, const int* sender,
                            const int* receiver, const T* x, const T* Y, const T* w, const T* grad_out, T* grad_x,
                            T* grad_Y, T* grad_w) {
  const int d1 = tp.dim1(), d2 = tp.dim2(), dw = tp.weight_numel, dout = tp.dim_out();
  std::vector<double> gx(num_nodes * d1, 0.0), gY(num_edges * d2, 0.0), gw(num_edges * dw, 0.0);
  const CGTable table = CGTable::build(kMaxL);
  for (std::size_t e = 0; e < num_edges; ++e) {
    const int s = sender[e], r = receiver[e];
    for (const auto& ins : tp.instructions) {
      const std::vector<double> C = table.dense(ins.l1, ins.l2, ins.l3);
      const int n1 = 2 * ins.l1 + 1, n2 = 2 * ins.l2 + 1, n3 = 2 * ins.l3 + 1;
      for (int u = 0; u < ins.mul; ++u) {
        for (int i = 0; i < n1; ++i) {
          for (int j = 0; j < n2; ++j) {
            for (int k = 0; k < n3; ++k) {
              const double c = ins.coefficient * C[(i * n2 + j) * n3 + k];
              const double g = grad_out[r * dout + ins.offset_out + u * n3 + k];
              const double wv = w[e * dw + ins.offset_weight + u];
              const double xv = x[s * d1 + ins.offset1 + u * n1 + i];
              const double yv = Y[e * d2 + ins.offset2 + j];
              gx[s * d1 + ins.offset1 + u * n1 + i] += c * g * wv * yv;
              gY[e * d2 + ins.offset2 + j] += c * g * wv * xv;
              gw[e * dw + ins.offset_weight + u] += c * g * xv * yv;
            }
          }
        }
      }
    }
  }
  for (std::size_t i = 0; i < gx.size(); ++i) {
    grad_x[i] = static_cast<T>(gx[i]);
  }
  for (std::size_t i = 0; i < gY.size(); ++i) {
    grad_Y[i] = static_cast<T>(gY[i]);
  }
  for (std::size_t i = 0; i < gw.size(); ++i) {
    grad_w[i] = static_cast<T>(gw[i]);
  }
}

}  // namespace fastmlip::kernels::reference
