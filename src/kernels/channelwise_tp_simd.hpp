// SPDX-License-Identifier: MIT
#pragma once
/// \file The channelwise TP's innermost work on the host, one instruction of one edge at a
/// time, dispatched at run time to the widest registers the CPU has (the mechanism of
/// math/simd_kernels.hpp: one translation unit per level in kernels/isa/, internal linkage
/// there, a table of function pointers chosen by math::active_isa(), so FASTMLIP_ISA forces a
/// level for these as for the dense kernels).
///
/// The Kokkos functors (impl/channelwise_tp_impl.hpp) call these from their host path (one
/// thread per row) for float and double, so the portable build's TP runs AVX2 + FMA or
/// AVX-512 code where the CPU has it. They are not Kokkos code themselves: a Kokkos functor
/// compiled with -mavx512f would share inline Kokkos and std functions with the baseline's
/// copies, and the linker may keep the AVX-512 one for everybody.
///
/// Rows are in ir_mul order (channel innermost): an instruction's block of component i starts
/// at i * mul. The units are compiled without contraction (no FMA), so every level gives the
/// base level's bits, which are the Kokkos functors' own loops' bits: the same products and
/// sums in the same order, only more of them at once. (FMA measured no faster: the loops wait
/// on loads, not on arithmetic.)
#include "kernels/impl/channelwise_tp_entry.hpp"
#include "math/simd_kernels.hpp"

namespace fastmlip::kernels {

template <class T>
struct ChannelwiseTPSimd {
  /// Forward, an edge's share of its receiver's row: for each of the instruction's nnz CG
  /// entries c, dst[c.k][u] += c.value y[c.j] w[u] src[c.i][u], u < mul (src: the sender's
  /// row at the instruction's input offset; dst: the receiver's at its output offset).
  void (*scatter)(const impl::TPEntryDev<T>* cg, int nnz, int mul, const T* y, const T* w, const T* src,
                  T* dst);
  /// The same with the roles of i and k exchanged, the input gradient's share:
  /// dst[c.i][u] += c.value y[c.j] w[u] src[c.k][u] (src: grad_out of the receiver; dst:
  /// grad_x of the sender).
  void (*scatter_transposed)(const impl::TPEntryDev<T>* cg, int nnz, int mul, const T* y, const T* w,
                             const T* src, T* dst);
  /// The edge's weight and attribute gradients: gw[u] += c.value y[c.j] x[c.i][u] g[c.k][u] and
  /// gy[c.j] += c.value sum_u w[u] x[c.i][u] g[c.k][u], the sum over u in 8 interleaved parts
  /// (impl/interleaved_sum.hpp's order).
  void (*grads)(const impl::TPEntryDev<T>* cg, int nnz, int mul, const T* y, const T* w, const T* x,
                const T* g, T* gw, T* gy);
  /// A radial table's cubic Hermite values at one r (impl/radial_table_impl.hpp's HermiteTable):
  /// out[j] = h[0] y0[j] + h[1] m0[j] + h[2] y1[j] + h[3] m1[j], j < n, with the knot rows m0 =
  /// y0 + width, y1 = y0 + 2 width, m1 = y0 + 3 width: an instruction's weights.
  void (*hermite_values)(const T* y0, int width, const T* h, int n, T* out);
  /// sum_j g[j] (h[0] y0[j] + h[1] m0[j] + h[2] y1[j] + h[3] m1[j]) with the derivative's basis
  /// weights h, in 8 interleaved parts (impl/interleaved_sum.hpp's order): dR/dr's contraction
  /// with an instruction's weight gradient.
  T (*hermite_dot)(const T* y0, int width, const T* h, int n, const T* g);
};

/// The kernels of the active level (math::active_isa()), for T = float or double.
template <class T>
const ChannelwiseTPSimd<T>& channelwise_tp_simd();
/// The kernels of one level; an UnsupportedError if !math::isa_available(isa). For tests and
/// benchmarks that compare levels.
template <class T>
const ChannelwiseTPSimd<T>& channelwise_tp_simd(math::Isa isa);

}  // namespace fastmlip::kernels
