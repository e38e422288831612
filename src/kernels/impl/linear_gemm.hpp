// SPDX-License-Identifier: MIT
#pragma once
/// \file The equivariant linear map's weight gradient on host execution spaces as dense
/// products (math/simd_kernels.hpp).
///
/// For an instruction (mul_in u, mul_out v, irrep dimension d) and a weight set s,
/// dW[u][v] = pw sum over nodes n of set s and m < d of x[n, in + u d + m] g[n, out + v d + m]:
/// with the (node, m) pairs as the rows k of X [k][u] and G [k][v], dW = pw X^T G. The device
/// functor (TagReverseWeights) sums per weight, reading every node's rows once per weight; here
/// X^T and G are gathered once per (set, instruction) and multiplied as one GEMM. Dual numbers
/// run as value and tangent planes: (X^T G)' = X'^T G + X^T G'.
#include <Kokkos_Core.hpp>
#include <type_traits>
#include <vector>

#include "kernels/impl/linear_impl.hpp"
#include "math/dual.hpp"
#include "math/simd_kernels.hpp"

namespace fastmlip::kernels::impl {

template <class ExecSpace, class T>
struct LinearWeightsGemmFunctor {
  using R = std::decay_t<decltype(value_of(T()))>;
  static constexpr bool kDual = is_dual_v<T>;
  struct TagReverseWeights {};
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  Kokkos::View<const LinearInsDev*, ExecSpace> m_ins;
  int m_num_ins = 0;
  Kokkos::View<const int*, ExecSpace> m_group_ptr, m_group_nodes;  // nodes of each weight set
  ConstMatrix m_x, m_grad_out;
  Matrix m_grad_W;  // [sets, weight_numel]

  // Host only (launched on host spaces): no KOKKOS_INLINE_FUNCTION. One work item is one
  // (weight set, instruction), whose weights no other item writes.
  void operator()(TagReverseWeights, int j) const {
    const int s = j / m_num_ins;
    const LinearInsDev I = m_ins(j % m_num_ins);
    const int first = m_group_ptr(s), count = m_group_ptr(s + 1) - first, rows = count * I.dim;
    const int a = I.mul_in, b = I.mul_out;
    std::vector<R> xv(static_cast<std::size_t>(a) * rows), gv(static_cast<std::size_t>(rows) * b);
    std::vector<R> xd(kDual ? xv.size() : 0), gd(kDual ? gv.size() : 0);
    for (int p = 0; p < count; ++p) {
      const int n = m_group_nodes(first + p);
      for (int m = 0; m < I.dim; ++m) {
        const std::size_t k = static_cast<std::size_t>(p) * I.dim + m;
        for (int u = 0; u < a; ++u) {
          const T x = m_x(n, I.offset_in + u * I.dim + m);
          xv[u * rows + k] = value_of(x);
          if constexpr (kDual) {
            xd[u * rows + k] = x.d;
          }
        }
        for (int v = 0; v < b; ++v) {
          const T g = m_grad_out(n, I.offset_out + v * I.dim + m);
          gv[k * b + v] = value_of(g);
          if constexpr (kDual) {
            gd[k * b + v] = g.d;
          }
        }
      }
    }
    std::vector<R> yv(static_cast<std::size_t>(a) * b, R(0)), yd(kDual ? yv.size() : 0, R(0));
    if (rows > 0) {
      const auto& k = math::simd_kernels<R>();
      k.gemm(xv.data(), a, rows, rows, gv.data(), b, yv.data(), b, false, nullptr);
      if constexpr (kDual) {
        k.gemm(xd.data(), a, rows, rows, gv.data(), b, yd.data(), b, false, nullptr);
        k.gemm(xv.data(), a, rows, rows, gd.data(), b, yd.data(), b, true, nullptr);
      }
    }
    const R pw = static_cast<R>(I.path_weight);
    for (std::size_t w = 0; w < yv.size(); ++w) {
      if constexpr (kDual) {
        m_grad_W(s, I.offset_weight + w) = T(pw * yv[w], pw * yd[w]);
      } else {
        m_grad_W(s, I.offset_weight + w) = pw * yv[w];
      }
    }
  }
};

}  // namespace fastmlip::kernels::impl
