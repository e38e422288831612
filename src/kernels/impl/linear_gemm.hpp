// SPDX-License-Identifier: MIT
#pragma once
/// \file The equivariant linear map on host execution spaces as dense products
/// (math/simd_kernels.hpp, dispatched to the CPU's widest registers).
///
/// Forward and input gradient (float and double): per tile of LinearFunctor (up to kTile nodes
/// of one weight set) and instruction, the tile's (node, m) rows gathered as X [rows][mul_from],
/// multiplied by the instruction's weights as one GEMM and added, times the path weight, into
/// the output rows: the tiled functor's sums in the same order (and its bits at the base level).
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
struct LinearTilesGemmFunctor {
  static_assert(std::is_floating_point_v<T>, "LinearTilesGemmFunctor: float or double");
  struct TagForward {};
  struct TagReverse {};
  LinearFunctor<ExecSpace, T> m_f;  ///< the operands, the tiles and the grouping by set
  /// The reverse pass's weights transposed per instruction: [sets][weight_numel], instruction
  /// q's block at its offset_weight as [mul_out][mul_in].
  Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace> m_Wt;

  // Host only (launched on host spaces): no KOKKOS_INLINE_FUNCTION.
  void operator()(TagForward, int t) const { tile<false>(t); }
  void operator()(TagReverse, int t) const { tile<true>(t); }

  template <bool Reverse>
  void tile(int t) const {
    int s = 0, b = 0, e = 0;
    if (!m_f.tile_bounds(t, s, b, e)) {
      return;
    }
    const int count = e - b;
    const auto in = Reverse ? m_f.m_grad_out : m_f.m_x;
    const auto out = Reverse ? m_f.m_grad_x : m_f.m_out;
    const int width = static_cast<int>(out.extent(1));
    for (int p = 0; p < count; ++p) {
      for (int k = 0; k < width; ++k) {
        out(m_f.node_at(b + p), k) = T(0);
      }
    }
    // One pair of buffers per thread, grown to the largest tile seen: no allocation per tile.
    thread_local std::vector<T> X, Y;
    const auto& gemm = math::simd_kernels<T>().gemm;
    for (int q = 0; q < static_cast<int>(m_f.m_ins.extent(0)); ++q) {
      const LinearInsDev I = m_f.m_ins(q);
      const int d = I.dim, rows = count * d;
      const int mul_from = Reverse ? I.mul_out : I.mul_in, mul_to = Reverse ? I.mul_in : I.mul_out;
      const int off_from = Reverse ? I.offset_out : I.offset_in,
                off_to = Reverse ? I.offset_in : I.offset_out;
      if (rows == 0 || mul_from == 0 || mul_to == 0) {
        continue;
      }
      if (X.size() < static_cast<std::size_t>(rows) * mul_from) {
        X.resize(static_cast<std::size_t>(rows) * mul_from);
      }
      if (Y.size() < static_cast<std::size_t>(rows) * mul_to) {
        Y.resize(static_cast<std::size_t>(rows) * mul_to);
      }
      for (int row = 0; row < rows; ++row) {
        const int n = m_f.node_at(b + row / d), m = row % d;
        for (int a = 0; a < mul_from; ++a) {
          X[static_cast<std::size_t>(row) * mul_from + a] = in(n, off_from + a * d + m);
        }
      }
      const T* M = Reverse ? &m_Wt(s, I.offset_weight) : &m_f.m_W(s, I.offset_weight);
      gemm(X.data(), rows, mul_from, mul_from, M, mul_to, Y.data(), mul_to, false, nullptr);
      const T pw = static_cast<T>(I.path_weight);
      for (int row = 0; row < rows; ++row) {
        const int n = m_f.node_at(b + row / d), m = row % d;
        for (int c = 0; c < mul_to; ++c) {
          out(n, off_to + c * d + m) += pw * Y[static_cast<std::size_t>(row) * mul_to + c];
        }
      }
    }
  }
};

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
