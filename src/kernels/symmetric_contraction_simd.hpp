// SPDX-License-Identifier: MIT
#pragma once
/// \file The symmetric contraction's work per node on the host, dispatched at run time to the
/// widest registers the CPU has (as channelwise_tp_simd.hpp: one unit per level in
/// kernels/isa/, chosen by math::active_isa(), FASTMLIP_ISA forces one).
///
/// The same arithmetic as the Kokkos functors (impl/symmetric_contraction_impl.hpp), channel by
/// channel: the monomials from the prefix tree, the folded coefficients summed entry by entry,
/// the reverse walk of the tree. Only the channel block is wider: kSCSimdBlock channels (64
/// bytes: one AVX-512 register, two AVX2 or four SSE2 ones) in the forward, half that in the
/// reverse, whose two arrays per monomial (values and gradients) outgrow the L1 cache at 64
/// bytes a monomial in mp_medium's shape and ran 1.4x slower than at 32. No channel's sums
/// depend on the block, so every level gives the functors' bits (the units are compiled
/// without contraction).
#include "kernels/impl/symmetric_contraction_entry.hpp"
#include "math/simd_kernels.hpp"

namespace fastmlip::kernels {

/// Channels per block of the row kernels' forward (the reverse takes half); the coefficients'
/// channel extent is padded to a multiple of it.
template <class T>
inline constexpr int kSCSimdBlock = 64 / static_cast<int>(sizeof(T));

/// A contraction's tables in host memory (SymmetricContractionKokkos's views).
struct SCSimdShape {
  const impl::SCMonomialDev* mono;
  const impl::SCEntryDev* entries;
  const int *ell_offset, *ell_stride;
  int num_mono, num_entries, num_ell, channels, out_per_channel;
  int coef_ld;  ///< channel extent of the coefficients (padded to kSCSimdBlock)
  /// Values of T a call needs as scratch (whatever its number of nodes).
  template <class T>
  int scratch() const {
    return (2 * num_ell + 2 * num_mono + out_per_channel) * kSCSimdBlock<T>;
  }
};

template <class T>
struct SymmetricContractionSimd {
  /// `nodes` nodes, node n with the coefficients coef[n] (its element's [entries][coef_ld]
  /// block) and the rows x[n], out[n]: out[entry.out + c entry.stride] = sum over entries of
  /// that component of coef[g][c] monomial_g(x)[c], for every channel c. Writes the entries'
  /// components only. The nodes share the scratch and may share coefficients.
  void (*forward)(const SCSimdShape& s, int nodes, const T* const* coef, const T* const* x, T* const* out,
                  T* scratch);
  /// The input gradient of `nodes` nodes: grad_x[n] = d sum(out[n] * grad_out[n]) / dx[n]
  /// (every ell of every channel written).
  void (*reverse)(const SCSimdShape& s, int nodes, const T* const* coef, const T* const* x,
                  const T* const* grad_out, T* const* grad_x, T* scratch);
};

/// The kernels of the active level (math::active_isa()), for T = float or double.
template <class T>
const SymmetricContractionSimd<T>& symmetric_contraction_simd();
/// The kernels of one level; an UnsupportedError if !math::isa_available(isa).
template <class T>
const SymmetricContractionSimd<T>& symmetric_contraction_simd(math::Isa isa);

}  // namespace fastmlip::kernels
