// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functors of the equivariant linear map. Forward and reverse are tiled: a team
/// takes up to kTile nodes of one weight set and, path by path, multiplies their rows as one
/// small GEMM, (nodes x m) rows by mul_in x mul_out weights, with the rows staged in team
/// scratch as [channel][row] so each weight is loaded once per tile and the inner loop over
/// rows vectorises. (One node at a time, every weight streamed through the cache per node and
/// accessed with a stride of mul_out; that took 30% of a MACE step.) Weight gradients: per
/// weight, summing the nodes of its set in a fixed order.
#include <Kokkos_Core.hpp>

namespace fastmlip::kernels::impl {

struct LinearInsDev {
  int mul_in, mul_out, dim, offset_in, offset_out, offset_weight;
  double path_weight;
};

template <class ExecSpace, class T>
struct LinearFunctor {
  struct TagForward {};
  struct TagReverse {};
  struct TagReverseWeights {};
  static constexpr int kTile = 16;  ///< nodes per team
  static constexpr int kRows = 32;  ///< (node, m) rows per GEMM block: the accumulators of a thread
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  Kokkos::View<const LinearInsDev*, ExecSpace> m_ins;
  Kokkos::View<const int*, ExecSpace> m_weight_ins;              // instruction of each weight index
  int m_dim_in = 0, m_dim_out = 0, m_weight_numel = 0;
  ConstMatrix m_W;  // [sets, weight_numel]
  Kokkos::View<const int*, ExecSpace> m_set;  // per node; empty: set 0
  Kokkos::View<const int*, ExecSpace> m_group_ptr, m_group_nodes;
  ConstMatrix m_x, m_grad_out;
  Matrix m_out, m_grad_x, m_grad_W;
  /// Tiles of the forward and reverse stages: with one weight set, tile t is nodes
  /// [t kTile, (t+1) kTile); with several, the nodes grouped by set (m_group_ptr, m_group_nodes,
  /// LinearGroupFunctor) and each set's run cut into tiles, m_tile_ptr(s) the first of set s.
  Kokkos::View<const int*, ExecSpace> m_tile_ptr;
  int m_num_nodes = 0;
  int m_max_mul = 0;  ///< largest mul_in or mul_out of any instruction (scratch rows)
  int m_scratch_level = 0;  ///< team scratch level of the tiles (impl::set_team_scratch)

  KOKKOS_INLINE_FUNCTION int set_of(int n) const { return m_set.extent(0) ? m_set(n) : 0; }
  KOKKOS_INLINE_FUNCTION int node_at(int pos) const {
    return m_group_nodes.extent(0) ? m_group_nodes(pos) : pos;
  }
  /// Tile t's weight set and positions [b, e) in the node order; false for a tile past the
  /// last (the launch's league is an upper bound of the tiles with several sets).
  KOKKOS_INLINE_FUNCTION bool tile_bounds(int t, int& s, int& b, int& e) const {
    if (m_tile_ptr.extent(0) == 0) {
      s = 0;
      b = t * kTile;
      e = b + kTile < m_num_nodes ? b + kTile : m_num_nodes;
      return b < e;
    }
    const int sets = static_cast<int>(m_tile_ptr.extent(0)) - 1;
    if (t >= m_tile_ptr(sets)) {
      return false;
    }
    s = 0;
    while (t >= m_tile_ptr(s + 1)) {
      ++s;
    }
    b = m_group_ptr(s) + (t - m_tile_ptr(s)) * kTile;
    e = b + kTile < m_group_ptr(s + 1) ? b + kTile : m_group_ptr(s + 1);
    return true;
  }

  std::size_t tile_shmem_bytes() const { return sizeof(T) * static_cast<std::size_t>(m_max_mul) * kRows + 64; }

  /// One tile, every path. Forward: out[n, o + v d + m] = sum_paths pw sum_u W[u, v] x[n, i + u d + m].
  /// Reverse (the transpose): grad_x[n, i + u d + m] = sum_paths pw sum_v W[u, v] g[n, o + v d + m].
  template <bool Reverse, class Member>
  KOKKOS_INLINE_FUNCTION void tile(const Member& team) const {
    int s = 0, b = 0, e = 0;
    if (!tile_bounds(team.league_rank(), s, b, e)) {
      return;  // the whole team: past the last tile
    }
    const int count = e - b;
    const ConstMatrix in = Reverse ? m_grad_out : m_x;
    const Matrix out = Reverse ? m_grad_x : m_out;
    const int width = static_cast<int>(out.extent(1));
    T* X = static_cast<T*>(team.team_scratch(m_scratch_level).get_shmem(sizeof(T) * m_max_mul * kRows));
    const auto self = *this;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, count * width),
                         [=](int k) { out(self.node_at(b + k / width), k % width) = T(0); });
    team.team_barrier();
    for (int q = 0; q < static_cast<int>(m_ins.extent(0)); ++q) {
      const LinearInsDev I = m_ins(q);
      const int d = I.dim;
      const int mul_from = Reverse ? I.mul_out : I.mul_in, mul_to = Reverse ? I.mul_in : I.mul_out;
      const int off_from = Reverse ? I.offset_out : I.offset_in, off_to = Reverse ? I.offset_in : I.offset_out;
      const T pw = static_cast<T>(I.path_weight);
      for (int r0 = 0; r0 < count * d; r0 += kRows) {
        const int nr = count * d - r0 < kRows ? count * d - r0 : kRows;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, mul_from), [=](int a) {
          for (int r = 0; r < kRows; ++r) {
            const int row = r0 + r;
            X[a * kRows + r] = r < nr ? in(self.node_at(b + row / d), off_from + a * d + row % d) : T(0);
          }
        });
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, mul_to), [=](int c) {
          T acc[kRows];
          for (int r = 0; r < kRows; ++r) {
            acc[r] = T(0);
          }
          for (int a = 0; a < mul_from; ++a) {
            // W[u, v] at u * mul_out + v: forward a = u, c = v; reverse a = v, c = u.
            const T w = Reverse ? self.m_W(s, I.offset_weight + c * I.mul_out + a)
                                : self.m_W(s, I.offset_weight + a * I.mul_out + c);
            const T* row = X + a * kRows;
            for (int r = 0; r < kRows; ++r) {
              acc[r] += row[r] * w;
            }
          }
          for (int r = 0; r < nr; ++r) {
            const int row = r0 + r;
            out(self.node_at(b + row / d), off_to + c * d + row % d) += pw * acc[r];
          }
        });
        team.team_barrier();
      }
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagForward, const typename Kokkos::TeamPolicy<ExecSpace, TagForward>::member_type& team) const {
    tile<false>(team);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, const typename Kokkos::TeamPolicy<ExecSpace, TagReverse>::member_type& team) const {
    tile<true>(team);
  }

  // Index j over sets x weight_numel.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseWeights, int j) const {
    const int s = j / m_weight_numel, k = j % m_weight_numel;
    const LinearInsDev I = m_ins(m_weight_ins(k));
    const int u = (k - I.offset_weight) / I.mul_out, v = (k - I.offset_weight) % I.mul_out;
    T acc = 0;
    for (int p = m_group_ptr(s); p < m_group_ptr(s + 1); ++p) {
      const int n = m_group_nodes(p);
      for (int m = 0; m < I.dim; ++m) {
        acc += m_x(n, I.offset_in + u * I.dim + m) * m_grad_out(n, I.offset_out + v * I.dim + m);
      }
    }
    m_grad_W(s, k) = static_cast<T>(I.path_weight) * acc;
  }
};

/// The nodes grouped by weight set for the tiles of LinearFunctor, on the execution space:
/// count each set's nodes (atomics), offsets and tile offsets (one thread: a few dozen sets),
/// then each node into its set's run (atomics). The order within a run is whatever the atomics
/// give: each node's output is computed from its own row alone, so it does not change a bit.
template <class ExecSpace>
struct LinearGroupFunctor {
  struct TagCount {};
  struct TagOffsets {};
  struct TagFill {};
  static constexpr int kTile = 16;  ///< LinearFunctor's nodes per tile

  Kokkos::View<const int*, ExecSpace> m_set;
  Kokkos::View<int*, ExecSpace> m_count, m_group_ptr, m_tile_ptr, m_nodes;
  int m_sets = 0;

  KOKKOS_INLINE_FUNCTION void operator()(TagCount, int n) const { Kokkos::atomic_add(&m_count(m_set(n)), 1); }
  KOKKOS_INLINE_FUNCTION void operator()(TagOffsets, int) const {
    m_group_ptr(0) = 0;
    m_tile_ptr(0) = 0;
    for (int g = 0; g < m_sets; ++g) {
      m_group_ptr(g + 1) = m_group_ptr(g) + m_count(g);
      m_tile_ptr(g + 1) = m_tile_ptr(g) + (m_count(g) + kTile - 1) / kTile;
      m_count(g) = 0;  // the fill's cursors
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagFill, int n) const {
    const int g = m_set(n);
    m_nodes(m_group_ptr(g) + Kokkos::atomic_fetch_add(&m_count(g), 1)) = n;
  }
};

}  // namespace fastmlip::kernels::impl
