// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functors of the channelwise tensor product, fused with gather and scatter.
///
/// Forward: one team per receiver, one thread per channel u. A thread walks the receiver's
/// incoming edges, gathers the sender's channel-u features, contracts them with the edge's
/// spherical harmonics through the sparse CG entries, scales by the edge's weight, and sums in
/// its private accumulator; the message per edge never exists in memory (seed section 4.2).
/// Reverse: sender-feature gradients gathered per sender over the transposed index; edge
/// gradients (weights, harmonics) per edge. No atomics anywhere.
#include <Kokkos_Core.hpp>

#include "kernels/edge_index.hpp"

namespace fastmlip::kernels::impl {

/// Per-thread accumulator limits of the reverse kernels, in one place. (The forward keeps its
/// accumulators in team scratch, sized at launch.)
struct ChannelwiseTPLimits {
  static constexpr int kMaxInPerChannel = 64;  ///< sum of 2 l1 + 1 over irreps1 entries
  static constexpr int kMaxEdgeAttr = 64;      ///< dim of irreps2 (25 for l <= 4)
};

/// An instruction as the kernels see it.
struct TPInstructionDev {
  int mul, n1, n2, n3;
  int offset1, offset2, offset_out, offset_weight;
  int cg_begin, cg_end;
  int local_out;  ///< start of this instruction's outputs in a channel's accumulator
  int local_in;   ///< start of its irreps1 entry in a channel's input-gradient accumulator
  int m_offset;   ///< start of its [n1 x n3] CG-times-harmonics table in team scratch
};

template <class T>
struct TPEntryDev {
  int i, j, k;
  T value;
};

template <class ExecSpace, class T>
struct ChannelwiseTPFunctor {
  struct TagForward {};
  struct TagReverseSender {};
  struct TagReverseEdge {};
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using member_fwd = typename Kokkos::TeamPolicy<ExecSpace, TagForward>::member_type;
  using member_rev = typename Kokkos::TeamPolicy<ExecSpace, TagReverseSender>::member_type;

  Kokkos::View<const TPInstructionDev*, ExecSpace> m_ins;
  Kokkos::View<const TPEntryDev<T>*, ExecSpace> m_cg;
  int m_num_ins = 0, m_max_mul = 0, m_out_per_channel = 0, m_in_per_channel = 0, m_dim2 = 0;
  int m_m_size = 0;  ///< sum of n1 * n3 over the instructions
  EdgeIndex<ExecSpace> m_graph;
  ConstMatrix m_x, m_Y, m_w, m_grad_out;
  Matrix m_out, m_grad_x, m_grad_Y, m_grad_w;

  // Forward. Per edge the team first contracts the CG tables with the edge's harmonics,
  // M_q[i][k] = sum_j C_q[i][j][k] Y[e, j], which does not depend on the channel; every channel
  // thread then needs only n1 * n3 multiply-adds per instruction instead of three multiplies
  // per CG non-zero, and never reads Y.
  KOKKOS_INLINE_FUNCTION void operator()(TagForward, const member_fwd& team) const {
    const int n = team.league_rank();
    const auto self = *this;
    T* M = static_cast<T*>(team.team_shmem().get_shmem(sizeof(T) * m_m_size));
    // Each thread keeps its channel's accumulator across the receiver's edges in a team-scratch
    // slice: [channel][out_per_channel].
    T* acc_all = static_cast<T*>(team.team_shmem().get_shmem(sizeof(T) * m_max_mul * m_out_per_channel));
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m_max_mul * m_out_per_channel), [=](int i) { acc_all[i] = T(0); });
    for (int e = m_graph.receiver_ptr(n); e < m_graph.receiver_ptr(n + 1); ++e) {
      team.team_barrier();
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, self.m_num_ins), [=](int q) {
        const TPInstructionDev& I = self.m_ins(q);
        T* Mq = M + I.m_offset;
        for (int z = 0; z < I.n1 * I.n3; ++z) {
          Mq[z] = T(0);
        }
        for (int z = I.cg_begin; z < I.cg_end; ++z) {
          const auto& c = self.m_cg(z);
          Mq[c.i * I.n3 + c.k] += c.value * self.m_Y(e, I.offset2 + c.j);
        }
      });
      team.team_barrier();
      const int s = m_graph.sender(e);
      Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m_max_mul), [=](int u) {
        T* acc = acc_all + u * self.m_out_per_channel;
        for (int q = 0; q < self.m_num_ins; ++q) {
          const TPInstructionDev& I = self.m_ins(q);
          if (u >= I.mul) {
            continue;
          }
          const T wv = self.m_w(e, I.offset_weight + u);
          const T* Mq = M + I.m_offset;
          T* out = acc + I.local_out;
          const int xbase = I.offset1 + u * I.n1;
          for (int i = 0; i < I.n1; ++i) {
            const T xw = self.m_x(s, xbase + i) * wv;
            for (int k = 0; k < I.n3; ++k) {
              out[k] += Mq[i * I.n3 + k] * xw;
            }
          }
        }
      });
    }
    team.team_barrier();
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m_max_mul), [=](int u) {
      const T* acc = acc_all + u * self.m_out_per_channel;
      for (int q = 0; q < self.m_num_ins; ++q) {
        const TPInstructionDev& I = self.m_ins(q);
        if (u < I.mul) {
          for (int k = 0; k < I.n3; ++k) {
            self.m_out(n, I.offset_out + u * I.n3 + k) = acc[I.local_out + k];
          }
        }
      }
    });
  }

  /// Team scratch bytes the forward needs (M tables and the channel accumulators).
  std::size_t forward_shmem_bytes() const {
    return sizeof(T) * (static_cast<std::size_t>(m_m_size) + static_cast<std::size_t>(m_max_mul) * m_out_per_channel) +
           64;  // room for alignment of the second allocation
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagReverseSender, const member_rev& team) const {
    const int s = team.league_rank();
    const auto ins = m_ins;
    const auto cg = m_cg;
    const auto g = m_graph;
    const auto Y = m_Y, w = m_w, grad_out = m_grad_out;
    const auto grad_x = m_grad_x;
    const int num_ins = m_num_ins, per_channel = m_in_per_channel;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m_max_mul), [=](int u) {
      T acc[ChannelwiseTPLimits::kMaxInPerChannel];
      for (int c = 0; c < per_channel; ++c) {
        acc[c] = T(0);
      }
      for (int idx = g.sender_ptr(s); idx < g.sender_ptr(s + 1); ++idx) {
        const int e = g.sender_edges(idx);
        const int r = g.receiver(e);
        for (int q = 0; q < num_ins; ++q) {
          const TPInstructionDev& I = ins(q);
          if (u >= I.mul) {
            continue;
          }
          const T wv = w(e, I.offset_weight + u);
          const int gbase = I.offset_out + u * I.n3;
          for (int z = I.cg_begin; z < I.cg_end; ++z) {
            const auto& c = cg(z);
            acc[I.local_in + c.i] += c.value * wv * Y(e, I.offset2 + c.j) * grad_out(r, gbase + c.k);
          }
        }
      }
      // Each irreps1 entry is written once, by its first instruction (several instructions
      // share an entry; their contributions are already summed in acc).
      for (int q = 0; q < num_ins; ++q) {
        const TPInstructionDev& I = ins(q);
        if (u >= I.mul) {
          continue;
        }
        bool first = true;
        for (int p = 0; p < q; ++p) {
          first = first && ins(p).offset1 != I.offset1;
        }
        if (first) {
          for (int i = 0; i < I.n1; ++i) {
            grad_x(s, I.offset1 + u * I.n1 + i) = acc[I.local_in + i];
          }
        }
      }
    });
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagReverseEdge, int e) const {
    const int s = m_graph.sender(e), r = m_graph.receiver(e);
    T gy[ChannelwiseTPLimits::kMaxEdgeAttr];
    for (int j = 0; j < m_dim2; ++j) {
      gy[j] = T(0);
    }
    for (int q = 0; q < m_num_ins; ++q) {
      const TPInstructionDev& I = m_ins(q);
      for (int u = 0; u < I.mul; ++u) {
        const T wv = m_w(e, I.offset_weight + u);
        const int xbase = I.offset1 + u * I.n1, gbase = I.offset_out + u * I.n3;
        T gw = 0;
        for (int z = I.cg_begin; z < I.cg_end; ++z) {
          const auto& c = m_cg(z);
          const T xg = c.value * m_x(s, xbase + c.i) * m_grad_out(r, gbase + c.k);
          gw += xg * m_Y(e, I.offset2 + c.j);
          gy[I.offset2 + c.j] += xg * wv;
        }
        m_grad_w(e, I.offset_weight + u) = gw;
      }
    }
    for (int j = 0; j < m_dim2; ++j) {
      m_grad_Y(e, j) = gy[j];
    }
  }
};

}  // namespace fastmlip::kernels::impl
