// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functors of the symmetric contraction: one team per node, one thread per
/// channel; all monomials of the channel from the prefix tree (one multiplication each), then
/// the folded coefficients of the node's element. The reverse pass walks the tree backwards.
#include <Kokkos_Core.hpp>

namespace fastmlip::kernels::impl {

struct SymmetricContractionLimits {
  static constexpr int kMaxMonomials = 4096;   ///< 25 ells at correlation 3 need 3275
  static constexpr int kMaxOutPerChannel = 64;  ///< sum of 2L+1 over the output irreps
  static constexpr int kMaxEll = 64;
};

struct SCMonomialDev {
  int parent, last;
};
struct SCEntryDev {
  int out;  ///< column of channel 0's component in an output row; channel c adds c * stride
  int stride;
  int local;  ///< index in a channel's accumulator
  int monomial;
};

template <class ExecSpace, class T>
struct SymmetricContractionFunctor {
  struct TagForward {};
  struct TagReverse {};
  struct TagReverseCoef {};
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Limits = SymmetricContractionLimits;

  Kokkos::View<const SCMonomialDev*, ExecSpace> m_mono;
  Kokkos::View<const SCEntryDev*, ExecSpace> m_entries;
  Kokkos::View<const int*, ExecSpace> m_ell_offset, m_ell_stride;
  Kokkos::View<const T***, Kokkos::LayoutRight, ExecSpace> m_coef;  // [element, entry, channel]
  Kokkos::View<const int*, ExecSpace> m_species;
  Kokkos::View<const int*, ExecSpace> m_element_ptr, m_element_nodes;  // nodes grouped by element
  int m_channels = 0, m_num_mono = 0, m_num_entries = 0, m_num_ell = 0, m_out_per_channel = 0;
  ConstMatrix m_x, m_grad_out;
  Matrix m_out, m_grad_x;
  Kokkos::View<T***, Kokkos::LayoutRight, ExecSpace> m_grad_coef;

  // All monomials of node n, channel c, into mono[0 .. num_mono).
  KOKKOS_INLINE_FUNCTION void monomials(int n, int c, T* xl, T* mono) const {
    for (int i = 0; i < m_num_ell; ++i) {
      xl[i] = m_x(n, m_ell_offset(i) + c * m_ell_stride(i));
    }
    for (int t = 0; t < m_num_mono; ++t) {
      const SCMonomialDev md = m_mono(t);
      mono[t] = md.parent < 0 ? xl[md.last] : mono[md.parent] * xl[md.last];
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagForward, const typename Kokkos::TeamPolicy<ExecSpace, TagForward>::member_type& team) const {
    const int n = team.league_rank();
    const auto self = *this;  // copies of the views, never `this`, inside the lambda
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m_channels), [=](int c) {
      T xl[Limits::kMaxEll];
      T mono[Limits::kMaxMonomials];
      T acc[Limits::kMaxOutPerChannel];
      self.monomials(n, c, xl, mono);
      for (int j = 0; j < self.m_out_per_channel; ++j) {
        acc[j] = T(0);
      }
      const int e = self.m_species(n);
      for (int g = 0; g < self.m_num_entries; ++g) {
        const SCEntryDev en = self.m_entries(g);
        acc[en.local] += self.m_coef(e, g, c) * mono[en.monomial];
      }
      // Each output component of this channel once: entries of one `local` share out/stride.
      for (int g = 0; g < self.m_num_entries; ++g) {
        const SCEntryDev en = self.m_entries(g);
        self.m_out(n, en.out + c * en.stride) = acc[en.local];
      }
    });
  }

  // grad_mono[t] = sum over entries on t of coef * grad_out; then back through the tree.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, const typename Kokkos::TeamPolicy<ExecSpace, TagReverse>::member_type& team) const {
    const int n = team.league_rank();
    const auto self = *this;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m_channels), [=](int c) {
      T xl[Limits::kMaxEll];
      T gx[Limits::kMaxEll];
      T mono[Limits::kMaxMonomials];
      T gmono[Limits::kMaxMonomials];
      self.monomials(n, c, xl, mono);
      for (int t = 0; t < self.m_num_mono; ++t) {
        gmono[t] = T(0);
      }
      for (int i = 0; i < self.m_num_ell; ++i) {
        gx[i] = T(0);
      }
      const int e = self.m_species(n);
      for (int g = 0; g < self.m_num_entries; ++g) {
        const SCEntryDev en = self.m_entries(g);
        gmono[en.monomial] += self.m_coef(e, g, c) * self.m_grad_out(n, en.out + c * en.stride);
      }
      for (int t = self.m_num_mono - 1; t >= 0; --t) {
        const SCMonomialDev md = self.m_mono(t);
        if (md.parent < 0) {
          gx[md.last] += gmono[t];
        } else {
          gx[md.last] += gmono[t] * mono[md.parent];
          gmono[md.parent] += gmono[t] * xl[md.last];
        }
      }
      for (int i = 0; i < self.m_num_ell; ++i) {
        self.m_grad_x(n, self.m_ell_offset(i) + c * self.m_ell_stride(i)) = gx[i];
      }
    });
  }

  // grad_coef[e, g, c] = sum over nodes of element e of grad_out * monomial: one team per
  // element, nodes in a fixed order, so the sum is reproducible.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseCoef,
                                         const typename Kokkos::TeamPolicy<ExecSpace, TagReverseCoef>::member_type& team) const {
    const int e = team.league_rank();
    const auto self = *this;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, m_channels), [=](int c) {
      T xl[Limits::kMaxEll];
      T mono[Limits::kMaxMonomials];
      for (int g = 0; g < self.m_num_entries; ++g) {
        self.m_grad_coef(e, g, c) = T(0);
      }
      for (int p = self.m_element_ptr(e); p < self.m_element_ptr(e + 1); ++p) {
        const int n = self.m_element_nodes(p);
        self.monomials(n, c, xl, mono);
        for (int g = 0; g < self.m_num_entries; ++g) {
          const SCEntryDev en = self.m_entries(g);
          self.m_grad_coef(e, g, c) += self.m_grad_out(n, en.out + c * en.stride) * mono[en.monomial];
        }
      }
    });
  }
};

}  // namespace fastmlip::kernels::impl
