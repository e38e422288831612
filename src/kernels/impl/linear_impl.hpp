// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functors of the equivariant linear map: one team per node, one thread per
/// output (forward) or input (reverse) column; weight gradients per weight, summing the nodes
/// of its set in a fixed order.
#include <Kokkos_Core.hpp>

namespace fastmlip::kernels::impl {

struct LinearInsDev {
  int mul_in, mul_out, dim, offset_in, offset_out, offset_weight;
  double path_weight;
};
/// Which entry, channel and m a column of a feature vector is.
struct LinearColumn {
  int entry, mul, m;
};

template <class ExecSpace, class T>
struct LinearFunctor {
  struct TagForward {};
  struct TagReverse {};
  struct TagReverseWeights {};
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  Kokkos::View<const LinearInsDev*, ExecSpace> m_ins;
  Kokkos::View<const LinearColumn*, ExecSpace> m_out_cols, m_in_cols;
  Kokkos::View<const int*, ExecSpace> m_out_ins_ptr, m_out_ins;  // instructions per out entry
  Kokkos::View<const int*, ExecSpace> m_in_ins_ptr, m_in_ins;    // instructions per in entry
  Kokkos::View<const int*, ExecSpace> m_weight_ins;              // instruction of each weight index
  int m_dim_in = 0, m_dim_out = 0, m_weight_numel = 0;
  ConstMatrix m_W;  // [sets, weight_numel]
  Kokkos::View<const int*, ExecSpace> m_set;  // per node; empty: set 0
  Kokkos::View<const int*, ExecSpace> m_group_ptr, m_group_nodes;
  ConstMatrix m_x, m_grad_out;
  Matrix m_out, m_grad_x, m_grad_W;

  KOKKOS_INLINE_FUNCTION int set_of(int n) const { return m_set.extent(0) ? m_set(n) : 0; }

  KOKKOS_INLINE_FUNCTION void operator()(TagForward, const typename Kokkos::TeamPolicy<ExecSpace, TagForward>::member_type& team) const {
    const int n = team.league_rank();
    const auto self = *this;
    const int s = set_of(n);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m_dim_out), [=](int col) {
      const LinearColumn c = self.m_out_cols(col);
      T acc = 0;
      for (int p = self.m_out_ins_ptr(c.entry); p < self.m_out_ins_ptr(c.entry + 1); ++p) {
        const LinearInsDev I = self.m_ins(self.m_out_ins(p));
        T dot = 0;
        for (int u = 0; u < I.mul_in; ++u) {
          dot += self.m_W(s, I.offset_weight + u * I.mul_out + c.mul) * self.m_x(n, I.offset_in + u * I.dim + c.m);
        }
        acc += static_cast<T>(I.path_weight) * dot;
      }
      self.m_out(n, col) = acc;
    });
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, const typename Kokkos::TeamPolicy<ExecSpace, TagReverse>::member_type& team) const {
    const int n = team.league_rank();
    const auto self = *this;
    const int s = set_of(n);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m_dim_in), [=](int col) {
      const LinearColumn c = self.m_in_cols(col);
      T acc = 0;
      for (int p = self.m_in_ins_ptr(c.entry); p < self.m_in_ins_ptr(c.entry + 1); ++p) {
        const LinearInsDev I = self.m_ins(self.m_in_ins(p));
        T dot = 0;
        for (int v = 0; v < I.mul_out; ++v) {
          dot += self.m_W(s, I.offset_weight + c.mul * I.mul_out + v) * self.m_grad_out(n, I.offset_out + v * I.dim + c.m);
        }
        acc += static_cast<T>(I.path_weight) * dot;
      }
      self.m_grad_x(n, col) = acc;
    });
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

}  // namespace fastmlip::kernels::impl
