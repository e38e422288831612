// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functors of the symmetric contraction: one team per node, one thread per block
/// of kChannelBlock channels; all monomials of the block's channels from the prefix tree (one
/// multiplication each), then the folded coefficients of the node's element. The reverse pass
/// walks the tree backwards. Every array of a block is [index][channel in block], so the
/// innermost loops run over channels with unit stride in the monomials and in the coefficient
/// table ([element][entry][channel]): they vectorise, and each cache line of coefficients
/// serves kChannelBlock channels instead of one.
#include <Kokkos_Core.hpp>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/impl/symmetric_contraction_entry.hpp"
#include "kernels/symmetric_contraction_simd.hpp"
#include "math/dual.hpp"

namespace fastmlip::kernels::impl {

struct SymmetricContractionLimits {
  static constexpr int kMaxMonomials = 4096;   ///< 25 ells at correlation 3 need 3275
  static constexpr int kMaxOutPerChannel = 64;  ///< sum of 2L+1 over the output irreps
  static constexpr int kMaxEll = 64;
  /// The coefficients' channel extent is padded to a multiple of this: the functors' blocks
  /// and the host row kernels' (kSCSimdBlock: 8 or 16) all divide it.
  static constexpr int kCoefChannelPad = 16;
};

template <class ExecSpace, class T>
struct SymmetricContractionFunctor {
  struct TagForward {};
  struct TagReverse {};
  struct TagReverseCoef {};
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Limits = SymmetricContractionLimits;
  static constexpr int kChannelBlock = 4;  ///< m_coef's channel extent is padded to a multiple

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

  // All monomials of node n, channels c0 .. c0+B-1, into mono[t * B + b]; channels past the
  // last (a partial block) get zero inputs, hence zero monomials.
  KOKKOS_INLINE_FUNCTION void monomials(int n, int c0, T* xl, T* mono) const {
    constexpr int B = kChannelBlock;
    for (int i = 0; i < m_num_ell; ++i) {
      for (int b = 0; b < B; ++b) {
        xl[i * B + b] = c0 + b < m_channels ? m_x(n, m_ell_offset(i) + (c0 + b) * m_ell_stride(i)) : T(0);
      }
    }
    for (int t = 0; t < m_num_mono; ++t) {
      const SCMonomialDev md = m_mono(t);
      const T* x = xl + md.last * B;
      T* m = mono + t * B;
      if (md.parent < 0) {
        for (int b = 0; b < B; ++b) {
          m[b] = x[b];
        }
      } else {
        const T* p = mono + md.parent * B;
        for (int b = 0; b < B; ++b) {
          m[b] = p[b] * x[b];
        }
      }
    }
  }

  KOKKOS_INLINE_FUNCTION int channel_blocks() const { return (m_channels + kChannelBlock - 1) / kChannelBlock; }

  KOKKOS_INLINE_FUNCTION void operator()(TagForward, const typename Kokkos::TeamPolicy<ExecSpace, TagForward>::member_type& team) const {
    constexpr int B = kChannelBlock;
    const int n = team.league_rank();
    const auto self = *this;  // copies of the views, never `this`, inside the lambda
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, channel_blocks()), [=](int cb) {
      const int c0 = cb * B;
      T xl[Limits::kMaxEll * B];
      T mono[Limits::kMaxMonomials * B];
      T acc[Limits::kMaxOutPerChannel * B];
      self.monomials(n, c0, xl, mono);
      for (int j = 0; j < self.m_out_per_channel * B; ++j) {
        acc[j] = T(0);
      }
      const int e = self.m_species(n);
      for (int g = 0; g < self.m_num_entries; ++g) {
        const SCEntryDev en = self.m_entries(g);
        const T* coef = &self.m_coef(e, g, c0);
        const T* m = mono + en.monomial * B;
        T* a = acc + en.local * B;
        for (int b = 0; b < B; ++b) {
          a[b] += coef[b] * m[b];
        }
      }
      // Each output component of these channels once: entries of one `local` share out/stride.
      for (int g = 0; g < self.m_num_entries; ++g) {
        const SCEntryDev en = self.m_entries(g);
        for (int b = 0; b < B && c0 + b < self.m_channels; ++b) {
          self.m_out(n, en.out + (c0 + b) * en.stride) = acc[en.local * B + b];
        }
      }
    });
  }

  // grad_mono[t] = sum over entries on t of coef * grad_out; then back through the tree.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, const typename Kokkos::TeamPolicy<ExecSpace, TagReverse>::member_type& team) const {
    constexpr int B = kChannelBlock;
    const int n = team.league_rank();
    const auto self = *this;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, channel_blocks()), [=](int cb) {
      const int c0 = cb * B;
      T xl[Limits::kMaxEll * B];
      T gx[Limits::kMaxEll * B];
      T mono[Limits::kMaxMonomials * B];
      T gmono[Limits::kMaxMonomials * B];
      T go[Limits::kMaxOutPerChannel * B];
      self.monomials(n, c0, xl, mono);
      for (int t = 0; t < self.m_num_mono * B; ++t) {
        gmono[t] = T(0);
      }
      for (int i = 0; i < self.m_num_ell * B; ++i) {
        gx[i] = T(0);
      }
      for (int g = 0; g < self.m_num_entries; ++g) {
        const SCEntryDev en = self.m_entries(g);
        for (int b = 0; b < B; ++b) {
          go[en.local * B + b] = c0 + b < self.m_channels ? self.m_grad_out(n, en.out + (c0 + b) * en.stride) : T(0);
        }
      }
      const int e = self.m_species(n);
      for (int g = 0; g < self.m_num_entries; ++g) {
        const SCEntryDev en = self.m_entries(g);
        const T* coef = &self.m_coef(e, g, c0);
        const T* o = go + en.local * B;
        T* gm = gmono + en.monomial * B;
        for (int b = 0; b < B; ++b) {
          gm[b] += coef[b] * o[b];
        }
      }
      for (int t = self.m_num_mono - 1; t >= 0; --t) {
        const SCMonomialDev md = self.m_mono(t);
        const T* gm = gmono + t * B;
        T* gxl = gx + md.last * B;
        if (md.parent < 0) {
          for (int b = 0; b < B; ++b) {
            gxl[b] += gm[b];
          }
        } else {
          const T* p = mono + md.parent * B;
          const T* x = xl + md.last * B;
          T* gp = gmono + md.parent * B;
          for (int b = 0; b < B; ++b) {
            gxl[b] += gm[b] * p[b];
            gp[b] += gm[b] * x[b];
          }
        }
      }
      for (int i = 0; i < self.m_num_ell; ++i) {
        for (int b = 0; b < B && c0 + b < self.m_channels; ++b) {
          self.m_grad_x(n, self.m_ell_offset(i) + (c0 + b) * self.m_ell_stride(i)) = gx[i * B + b];
        }
      }
    });
  }

  // grad_coef[e, g, c] = sum over nodes of element e of grad_out * monomial: one team per
  // element, nodes in a fixed order, so the sum is reproducible.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseCoef,
                                         const typename Kokkos::TeamPolicy<ExecSpace, TagReverseCoef>::member_type& team) const {
    constexpr int B = kChannelBlock;
    const int e = team.league_rank();
    const auto self = *this;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, channel_blocks()), [=](int cb) {
      const int c0 = cb * B;
      const int nb = self.m_channels - c0 < B ? self.m_channels - c0 : B;
      T xl[Limits::kMaxEll * B];
      T mono[Limits::kMaxMonomials * B];
      for (int g = 0; g < self.m_num_entries; ++g) {
        for (int b = 0; b < nb; ++b) {
          self.m_grad_coef(e, g, c0 + b) = T(0);
        }
      }
      for (int p = self.m_element_ptr(e); p < self.m_element_ptr(e + 1); ++p) {
        const int n = self.m_element_nodes(p);
        self.monomials(n, c0, xl, mono);
        for (int g = 0; g < self.m_num_entries; ++g) {
          const SCEntryDev en = self.m_entries(g);
          for (int b = 0; b < nb; ++b) {
            self.m_grad_coef(e, g, c0 + b) += self.m_grad_out(n, en.out + (c0 + b) * en.stride) * mono[en.monomial * B + b];
          }
        }
      }
    });
  }
};

/// The host's forward and input gradient: the row kernels (symmetric_contraction_simd.hpp)
/// over kNodes nodes per work item, which share each block of channels' coefficients in cache.
/// Host only (launched on host spaces): no KOKKOS_INLINE_FUNCTION.
template <class ExecSpace, class T>
struct SymmetricContractionRowsFunctor {
  struct TagForward {};
  struct TagReverse {};
  static constexpr int kNodes = 16;
  SymmetricContractionFunctor<ExecSpace, T> m_f;  ///< the tables and operands
  const SymmetricContractionSimd<T>* m_simd = nullptr;
  SCSimdShape m_shape{};

  void operator()(TagForward, int k) const { run<false>(k); }
  void operator()(TagReverse, int k) const { run<true>(k); }

  template <bool Reverse>
  void run(int k) const {
    // One buffer per thread, grown once: the work items of every call reuse it.
    thread_local std::vector<T> scratch;
    const auto need = static_cast<std::size_t>(m_shape.template scratch<T>());
    if (scratch.size() < need) {
      scratch.resize(need);
    }
    const int first = k * kNodes, nodes = static_cast<int>(m_f.m_x.extent(0));
    const int count = (first + kNodes < nodes ? first + kNodes : nodes) - first;
    const T* coef[kNodes];
    const T* x[kNodes];
    const T* grad_out[kNodes];
    T* out[kNodes];
    for (int i = 0; i < count; ++i) {
      const int n = first + i;
      coef[i] = &m_f.m_coef(m_f.m_species(n), 0, 0);
      x[i] = &m_f.m_x(n, 0);
      if constexpr (Reverse) {
        grad_out[i] = &m_f.m_grad_out(n, 0);
        out[i] = &m_f.m_grad_x(n, 0);
      } else {
        out[i] = &m_f.m_out(n, 0);
      }
    }
    if constexpr (Reverse) {
      m_simd->reverse(m_shape, count, coef, x, grad_out, out, scratch.data());
    } else {
      m_simd->forward(m_shape, count, coef, x, out, scratch.data());
    }
  }
};

/// The weights' fold into per-element coefficients and its adjoint, on the execution space
/// (SymmetricContraction::fold and unfold_gradient, from the same tables): the trainer's weights
/// change every step and live on its device, so they are folded there rather than copied to
/// the host and back. Each output is one thread's sum in a fixed order, with no atomics, in
/// double (Dual<double> for dual numbers) as the host's fold sums, so that float weights fold
/// to the coefficients the host gave them.
///
/// The weights are flat (SymmetricContraction::weight_offset): block b = o * correlation + nu - 1
/// is W[o][nu-1], [E, K_b, C], starting at E * C * m_block_k_start(b).
template <class ExecSpace, class T>
struct SymmetricContractionFoldFunctor {
  struct TagFold {};
  struct TagUnfold {};
  using Acc = host_scalar_t<T>;  ///< double, or Dual<double>

  Kokkos::View<const double*, ExecSpace> m_usym;          // SymmetricContraction::usym
  Kokkos::View<const int*, ExecSpace> m_entry_block;      // per entry: its block
  Kokkos::View<const int*, ExecSpace> m_entry_usym;       // per entry: its K values in m_usym
  Kokkos::View<const int*, ExecSpace> m_block_k_start;    // per block, and one past: sum of K before it
  Kokkos::View<const int*, ExecSpace> m_block_entry_ptr;  // per block, and one past: into m_block_entries
  Kokkos::View<const int*, ExecSpace> m_block_entries;    // the entries of each block, ascending
  int m_num_blocks = 0, m_num_entries = 0, m_channels = 0, m_num_elements = 0;

  Kokkos::View<const T*, ExecSpace> m_w;                                 // flat weights
  Kokkos::View<T***, Kokkos::LayoutRight, ExecSpace> m_coef;             // [E, entry, padded channel]
  Kokkos::View<const T***, Kokkos::LayoutRight, ExecSpace> m_grad_coef;  // [E, entry, channel]
  Kokkos::View<T*, ExecSpace> m_grad_w;                                  // flat weight gradient

  KOKKOS_INLINE_FUNCTION static Acc widen(const T& x) {
    if constexpr (is_dual_v<T>) {
      return Acc(static_cast<double>(x.v), static_cast<double>(x.d));
    } else {
      return static_cast<double>(x);
    }
  }
  KOKKOS_INLINE_FUNCTION static T narrow(const Acc& x) {
    if constexpr (is_dual_v<T>) {
      using V = typename T::value_type;
      return T(static_cast<V>(x.v), static_cast<V>(x.d));
    } else {
      return static_cast<T>(x);
    }
  }

  /// coef(e, g, c) = sum_k usym[g, k] W_b[e, k, c] for g's block b; zero in the padding.
  KOKKOS_INLINE_FUNCTION void operator()(TagFold, const std::int64_t i) const {
    const int padded = static_cast<int>(m_coef.extent(2));
    const int c = static_cast<int>(i % padded);
    const int g = static_cast<int>((i / padded) % m_num_entries);
    const int e = static_cast<int>(i / (static_cast<std::int64_t>(padded) * m_num_entries));
    Acc s = Acc(0);
    if (c < m_channels) {
      const int b = m_entry_block(g), k0 = m_block_k_start(b), K = m_block_k_start(b + 1) - k0;
      const std::int64_t base =
          (static_cast<std::int64_t>(m_num_elements) * k0 + static_cast<std::int64_t>(e) * K) * m_channels +
          c;
      const int u = m_entry_usym(g);
      for (int k = 0; k < K; ++k) {
        s += m_usym(u + k) * widen(m_w(base + static_cast<std::int64_t>(k) * m_channels));
      }
    }
    m_coef(e, g, c) = narrow(s);
  }

  /// grad_W_b[e, k, c] = sum over the entries g of block b of usym[g, k] grad_coef(e, g, c).
  KOKKOS_INLINE_FUNCTION void operator()(TagUnfold, const std::int64_t i) const {
    const std::int64_t per_k = static_cast<std::int64_t>(m_num_elements) * m_channels;
    int b = 0;
    while (b + 1 < m_num_blocks && i >= per_k * m_block_k_start(b + 1)) {
      ++b;
    }
    const int K = m_block_k_start(b + 1) - m_block_k_start(b);
    const std::int64_t local = i - per_k * m_block_k_start(b);
    const int c = static_cast<int>(local % m_channels);
    const int k = static_cast<int>((local / m_channels) % K);
    const int e = static_cast<int>(local / (static_cast<std::int64_t>(m_channels) * K));
    Acc s = Acc(0);
    for (int j = m_block_entry_ptr(b); j < m_block_entry_ptr(b + 1); ++j) {
      const int g = m_block_entries(j);
      s += m_usym(m_entry_usym(g) + k) * widen(m_grad_coef(e, g, c));
    }
    m_grad_w(i) = narrow(s);
  }
};

}  // namespace fastmlip::kernels::impl
