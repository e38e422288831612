// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functors of the channelwise tensor product, fused with gather and scatter.
///
/// All three kernels work on copies of the node rows transposed to channel-innermost order
/// ("ir_mul": [node][entry offset + i * mul + u], see IrMulTranspose), so that their inner
/// loops over channels read and write contiguous memory and vectorise; per CG non-zero an edge
/// then costs a few multiply-adds per channel and no gathers.
/// Forward: one thread per receiver walks its incoming edges and sums their messages into the
/// receiver's row; the message of an edge never exists in memory (seed section 4.2).
/// Reverse: sender-feature gradients gathered per sender over the transposed index, edge
/// gradients (weights, harmonics) per edge. No atomics anywhere. With one lane per row (the
/// host), both in one pass (TagReverseFused): each edge is visited once, from its sender, and
/// its weights (a table lookup with the spline) serve both sums.
/// Tabulated weights (inference with a radial table): each kernel evaluates an edge's weights
/// from the table itself and the edge kernel contracts their gradient with dR/dr at once, so
/// neither the [edges x weight_numel] weights nor their gradient ever exist in memory.
///
/// Lanes: each row (node or edge) is shared by Lanes work items, lane l taking the channels
/// u = l, l + Lanes, ... of every instruction. A CPU thread takes whole rows (Lanes = 1: the
/// channel loops are unit-stride and vectorise). A GPU needs many more threads than rows: 32
/// lanes make one warp per row, its channel loads coalesced, and a lane owns its channels' sums
/// outright. The only sums across lanes, an edge's grad_Y and grad_r, are atomic adds into
/// zeroed rows.
/// On the host, in float and double, an instruction's loops over CG entries and channels run
/// in ChannelwiseTPSimd's row kernels (channelwise_tp_simd.hpp), at the CPU's widest level.
#include <Kokkos_Core.hpp>
#include <type_traits>

#include "kernels/channelwise_tp_simd.hpp"
#include "kernels/edge_index.hpp"
#include "kernels/impl/channelwise_tp_entry.hpp"
#include "kernels/impl/interleaved_sum.hpp"
#include "kernels/impl/radial_table_impl.hpp"

namespace fastmlip::kernels::impl {

/// Lanes per row on ExecSpace (see above): 1 where it runs on the host, 32 (a warp) elsewhere.
template <class ExecSpace>
inline constexpr int kTPLanes = Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible ? 1 : 32;

/// Per-thread accumulator limits of the kernels, in one place.
struct ChannelwiseTPLimits {
  static constexpr int kMaxEdgeAttr = 64;    ///< dim of irreps2 (25 for l <= 4)
  static constexpr int kMaxTabulatedMul = 512;  ///< channels of an instruction with tabulated weights
};

/// One irreps entry: where its block starts in a row, its multiplicity and 2l+1.
struct IrrepEntryDev {
  int offset, mul, dim;
};

/// Between e3nn's row layout, block [u][i] per entry (mul_ir), and the channel-innermost
/// layout, block [i][u] (ir_mul); one thread per row.
template <class ExecSpace, class T>
struct IrMulTranspose {
  struct TagToIrMul {};
  struct TagFromIrMul {};
  Kokkos::View<const IrrepEntryDev*, ExecSpace> m_entries;
  Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace> m_src;
  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> m_dst;

  KOKKOS_INLINE_FUNCTION void operator()(TagToIrMul, int n) const {
    for (int q = 0; q < static_cast<int>(m_entries.extent(0)); ++q) {
      const IrrepEntryDev E = m_entries(q);
      for (int i = 0; i < E.dim; ++i) {
        for (int u = 0; u < E.mul; ++u) {
          m_dst(n, E.offset + i * E.mul + u) = m_src(n, E.offset + u * E.dim + i);
        }
      }
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagFromIrMul, int n) const {
    for (int q = 0; q < static_cast<int>(m_entries.extent(0)); ++q) {
      const IrrepEntryDev E = m_entries(q);
      for (int u = 0; u < E.mul; ++u) {
        for (int i = 0; i < E.dim; ++i) {
          m_dst(n, E.offset + u * E.dim + i) = m_src(n, E.offset + i * E.mul + u);
        }
      }
    }
  }
};

/// An instruction as the kernels see it.
struct TPInstructionDev {
  int mul, n1, n2, n3;
  int offset1, offset2, offset_out, offset_weight;
  int cg_begin, cg_end;
};

template <class ExecSpace, class T, int Lanes = kTPLanes<ExecSpace>>
struct ChannelwiseTPFunctor {
  static_assert(Lanes >= 1, "ChannelwiseTPFunctor: Lanes must be positive");
  struct TagForward {};
  struct TagReverseSender {};
  struct TagReverseEdge {};
  struct TagReverseFused {};  ///< TagReverseSender and TagReverseEdge in one pass (Lanes == 1)
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  Kokkos::View<const TPInstructionDev*, ExecSpace> m_ins;
  Kokkos::View<const TPEntryDev<T>*, ExecSpace> m_cg;
  // The output irreps' blocks: each lane zeroes its own channels of a row before summing into them.
  Kokkos::View<const IrrepEntryDev*, ExecSpace> m_entries_out;
  int m_num_ins = 0, m_dim2 = 0;
  EdgeIndex<ExecSpace> m_graph;
  ConstMatrix m_Y, m_w;
  Matrix m_grad_Y, m_grad_w;
  // x and grad_out in ir_mul order; out and grad_x accumulated in it.
  ConstMatrix m_xT, m_gT;
  Matrix m_outT, m_grad_xT;
  // Tabulated weights: w[e, :] = R(m_r[e]) from m_table (no data: weights from m_w), and
  // m_grad_r[e] = sum_j grad_w[e, j] dR_j/dr instead of m_grad_w.
  HermiteTable<ExecSpace, T> m_table;
  Kokkos::View<const T*, ExecSpace> m_r;
  Kokkos::View<T*, ExecSpace> m_grad_r;
  using Point = typename HermiteTable<ExecSpace, T>::Point;
  static constexpr int kMaxTabMul = ChannelwiseTPLimits::kMaxTabulatedMul;
  /// Whether the row kernels can serve this instantiation: one thread per row, float or double.
  static constexpr bool kSimd = Lanes == 1 && std::is_floating_point_v<T>;
  /// The row kernels (host memory; set by the owner for host execution spaces only), or null:
  /// the loops below.
  const ChannelwiseTPSimd<T>* m_simd = nullptr;

  KOKKOS_INLINE_FUNCTION bool tabulated() const { return m_table.data.extent(0) > 0; }
  /// Where edge e's length falls in the table (tables serve inference: float and double only).
  KOKKOS_INLINE_FUNCTION Point edge_point(int e, bool derivative) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (tabulated()) {
        return m_table.at(static_cast<double>(m_r(e)), derivative, m_table.table_of(e));
      }
    }
    return Point{};
  }
  /// The instruction's weights of edge e, indexed by channel: a row of m_w, or evaluated into
  /// buf from the table (lane's channels only).
  KOKKOS_INLINE_FUNCTION const T* weights(int e, const TPInstructionDev& I, const Point& p, int lane,
                                          T* buf) const {
    if (!tabulated()) {
      return &m_w(e, I.offset_weight);
    }
    if constexpr (kSimd) {
      if (m_simd != nullptr && !p.zero) {
        const T h[4] = {p.h00, p.h10, p.h01, p.h11};
        m_simd->hermite_values(p.y0 + I.offset_weight, m_table.width, h, I.mul, buf);
        return buf;
      }
    }
    if constexpr (Lanes == 1) {
      m_table.values(p, I.offset_weight, I.mul, buf);
    } else {
      for (int u = lane; u < I.mul; u += Lanes) {
        m_table.values(p, I.offset_weight + u, 1, buf + u);
      }
    }
    return buf;
  }

  /// out[r]_k[u] = sum over r's incoming edges e (from s) of w_e[u] sum_ij C_ijk Y_e,j x[s]_i[u],
  /// accumulated in ir_mul order (m_outT) so the loop over channels u is contiguous; the
  /// message of an edge never exists in memory.
  /// Work item t: row t / Lanes, lane t % Lanes.
  KOKKOS_INLINE_FUNCTION void operator()(TagForward, int t) const {
    const int r = t / Lanes, lane = t % Lanes;
    T* dst_row = &m_outT(r, 0);
    for (int q = 0; q < static_cast<int>(m_entries_out.extent(0)); ++q) {
      const IrrepEntryDev E = m_entries_out(q);
      for (int i = 0; i < E.dim; ++i) {
        for (int u = lane; u < E.mul; u += Lanes) {
          dst_row[E.offset + i * E.mul + u] = T(0);
        }
      }
    }
    T wbuf[kMaxTabMul];
    for (int e = m_graph.receiver_ptr(r); e < m_graph.receiver_ptr(r + 1); ++e) {
      scatter_edge<false>(e, &m_xT(m_graph.sender(e), 0), dst_row, lane, wbuf);
    }
  }

  /// Edge e's term of the forward sum into its receiver's row (Transposed = false:
  /// dst_k[u] += w[u] C_ijk Y_j src_i[u], src = the sender's x) or of grad_x into its sender's
  /// row (Transposed = true: dst_i[u] += w[u] C_ijk Y_j src_k[u], src = the receiver's grad_out);
  /// both rows in ir_mul order.
  template <bool Transposed>
  KOKKOS_INLINE_FUNCTION void scatter_edge(int e, const T* src_row, T* dst_row, int lane, T* wbuf) const {
    const Point p = edge_point(e, false);
    for (int q = 0; q < m_num_ins; ++q) {
      const TPInstructionDev& I = m_ins(q);
      scatter_instruction<Transposed>(e, I, weights(e, I, p, lane, wbuf), src_row, dst_row, lane);
    }
  }
  /// One instruction's share of scatter_edge, with the edge's weights w of that instruction.
  template <bool Transposed>
  KOKKOS_INLINE_FUNCTION void scatter_instruction(int e, const TPInstructionDev& I, const T* w,
                                                  const T* src_row, T* dst_row, int lane) const {
    if constexpr (kSimd) {
      if (m_simd != nullptr) {
        const auto kernel = Transposed ? m_simd->scatter_transposed : m_simd->scatter;
        kernel(&m_cg(I.cg_begin), I.cg_end - I.cg_begin, I.mul, &m_Y(e, I.offset2), w,
               src_row + (Transposed ? I.offset_out : I.offset1),
               dst_row + (Transposed ? I.offset1 : I.offset_out));
        return;
      }
    }
    for (int z = I.cg_begin; z < I.cg_end; ++z) {
      const auto& c = m_cg(z);
      const T cy = c.value * m_Y(e, I.offset2 + c.j);
      const T* src = src_row + (Transposed ? I.offset_out + c.k * I.mul : I.offset1 + c.i * I.mul);
      T* dst = dst_row + (Transposed ? I.offset1 + c.i * I.mul : I.offset_out + c.k * I.mul);
      for (int u = lane; u < I.mul; u += Lanes) {
        dst[u] += cy * w[u] * src[u];
      }
    }
  }

  /// grad_x[s] = sum over s's outgoing edges e (to r) of w_e[u] sum_jk C_ijk Y_e,j grad_out[r]_k[u],
  /// accumulated in ir_mul order so the loop over channels u is contiguous.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseSender, int t) const {
    const int s = t / Lanes, lane = t % Lanes;
    T wbuf[kMaxTabMul];
    for (int idx = m_graph.sender_ptr(s); idx < m_graph.sender_ptr(s + 1); ++idx) {
      const int e = m_graph.sender_edges(idx);
      scatter_edge<true>(e, &m_gT(m_graph.receiver(e), 0), &m_grad_xT(s, 0), lane, wbuf);
    }
  }

  /// Over the lane's channels u of one CG non-zero: gw[u] += cy x[u] g[u], and the return value
  /// sum_u w[u] x[u] g[u]. One row per thread (Lanes == 1): an interleaved sum, so that the loop
  /// vectorises (impl/interleaved_sum.hpp).
  KOKKOS_INLINE_FUNCTION static T channel_products(const T* x, const T* g, const T* w, T* gw, T cy, int mul,
                                                   int lane) {
    if constexpr (Lanes == 1) {
      return interleaved_sum<T>(mul, [&](int u) {
        const T xg = x[u] * g[u];
        gw[u] += cy * xg;
        return w[u] * xg;
      });
    }
    T sum = T(0);
    for (int u = lane; u < mul; u += Lanes) {
      const T xg = x[u] * g[u];
      gw[u] += cy * xg;
      sum += w[u] * xg;
    }
    return sum;
  }

  /// grad_w[e, u] = sum_ijk C_ijk Y_j x[s]_i[u] grad_out[r]_k[u] and
  /// grad_Y[e, j] = sum_ik C_ijk sum_u w[u] x[s]_i[u] grad_out[r]_k[u]: per CG non-zero, one
  /// contiguous pass over the channels serves both.
  /// With several lanes, each adds its channels' share of grad_Y and grad_r atomically into
  /// rows the caller zeroed.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseEdge, int t) const {
    const int e = t / Lanes, lane = t % Lanes;
    const int s = m_graph.sender(e), r = m_graph.receiver(e);
    T gy[ChannelwiseTPLimits::kMaxEdgeAttr];
    for (int j = 0; j < m_dim2; ++j) {
      gy[j] = T(0);
    }
    T wbuf[kMaxTabMul], gwbuf[kMaxTabMul];
    const Point p = edge_point(e, true);
    T gr = 0;
    for (int q = 0; q < m_num_ins; ++q) {
      const TPInstructionDev& I = m_ins(q);
      instruction_grads(e, I, weights(e, I, p, lane, wbuf), p, &m_xT(s, 0), &m_gT(r, 0), lane, gy, gr, gwbuf);
    }
    store_edge_grads(e, gy, gr);
  }

  /// Both reverse sums, one thread per sender s (Lanes == 1): for each of s's outgoing edges
  /// e and each instruction, the weights once, then TagReverseSender's scatter into grad_x[s]
  /// and TagReverseEdge's gradients of e. Each edge has one sender, so its rows are written
  /// once, and every sum has the two tags' operations in their order: the same bits, with one
  /// pass over the edges (and the radial table) where the two tags make two.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseFused, int s) const {
    static_assert(Lanes == 1, "TagReverseFused: one thread per row");
    T gy[ChannelwiseTPLimits::kMaxEdgeAttr];
    T wbuf[kMaxTabMul], gwbuf[kMaxTabMul];
    const T* x_row = &m_xT(s, 0);
    T* gx_row = &m_grad_xT(s, 0);
    for (int idx = m_graph.sender_ptr(s); idx < m_graph.sender_ptr(s + 1); ++idx) {
      const int e = m_graph.sender_edges(idx);
      const T* g_row = &m_gT(m_graph.receiver(e), 0);
      for (int j = 0; j < m_dim2; ++j) {
        gy[j] = T(0);
      }
      const Point p = edge_point(e, true);
      T gr = 0;
      for (int q = 0; q < m_num_ins; ++q) {
        const TPInstructionDev& I = m_ins(q);
        const T* w = weights(e, I, p, 0, wbuf);
        scatter_instruction<true>(e, I, w, g_row, gx_row, 0);
        instruction_grads(e, I, w, p, x_row, g_row, 0, gy, gr, gwbuf);
      }
      store_edge_grads(e, gy, gr);
    }
  }

  /// Instruction I's share of edge e's gradients, with its weights w: grad_w's block (into
  /// m_grad_w, or gwbuf with tabulated weights), grad_Y's added into gy and, with tabulated
  /// weights, grad_r's into gr. x_row and g_row: the sender's x and the receiver's grad_out.
  KOKKOS_INLINE_FUNCTION void instruction_grads(int e, const TPInstructionDev& I, const T* w, const Point& p,
                                                const T* x_row, const T* g_row, int lane, T* gy, T& gr,
                                                T* gwbuf) const {
    T* gw = tabulated() ? gwbuf : &m_grad_w(e, I.offset_weight);
    for (int u = lane; u < I.mul; u += Lanes) {
      gw[u] = T(0);
    }
    bool done = false;
    if constexpr (kSimd) {
      if (m_simd != nullptr) {
        m_simd->grads(&m_cg(I.cg_begin), I.cg_end - I.cg_begin, I.mul, &m_Y(e, I.offset2), w,
                      x_row + I.offset1, g_row + I.offset_out, gw, gy + I.offset2);
        done = true;
      }
    }
    for (int z = I.cg_begin; !done && z < I.cg_end; ++z) {
      const auto& c = m_cg(z);
      const T cy = c.value * m_Y(e, I.offset2 + c.j);
      const T* x = x_row + I.offset1 + c.i * I.mul;
      const T* g = g_row + I.offset_out + c.k * I.mul;
      gy[I.offset2 + c.j] += c.value * channel_products(x, g, w, gw, cy, I.mul, lane);
    }
    if (!tabulated()) {
      return;
    }
    if constexpr (kSimd) {
      if (m_simd != nullptr && !p.zero) {
        const T h[4] = {p.g00, p.g10, p.g01, p.g11};
        gr += m_simd->hermite_dot(p.y0 + I.offset_weight, m_table.width, h, I.mul, gw);
        return;
      }
    }
    if constexpr (Lanes == 1) {
      gr += m_table.derivative_dot(p, I.offset_weight, I.mul, gw);
    } else {
      for (int u = lane; u < I.mul; u += Lanes) {
        gr += m_table.derivative_dot(p, I.offset_weight + u, 1, gw + u);
      }
    }
  }

  /// Edge e's grad_Y row and grad_r: written by its one thread, or added by each lane.
  KOKKOS_INLINE_FUNCTION void store_edge_grads(int e, const T* gy, T gr) const {
    if constexpr (Lanes == 1) {
      for (int j = 0; j < m_dim2; ++j) {
        m_grad_Y(e, j) = gy[j];
      }
      if (tabulated()) {
        m_grad_r(e) = gr;
      }
    } else {
      for (int j = 0; j < m_dim2; ++j) {
        Kokkos::atomic_add(&m_grad_Y(e, j), gy[j]);
      }
      if (tabulated()) {
        Kokkos::atomic_add(&m_grad_r(e), gr);
      }
    }
  }
};

}  // namespace fastmlip::kernels::impl
