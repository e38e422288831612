// SPDX-License-Identifier: MIT
#pragma once
/// \file The models' dense products and activation loops, dispatched at run time to the widest
/// registers the CPU has, so that the portable build (x86-64 baseline: SSE2) runs AVX2 + FMA or
/// AVX-512 code where the CPU supports it and still runs anywhere.
///
/// Each instruction-set level is compiled in its own translation units (math/isa/) with that
/// level's -m flags, everything there in internal linkage (see math/impl/simd_math_impl.hpp for
/// why), and reached only through a table of plain function pointers that simd_kernels()
/// selects once: FASTMLIP_ISA=base|sse2|avx2|avx512 in the environment forces a level (sse2 is
/// the x86-64 name of base), otherwise the best one the CPU supports is used.
///
/// Results: the elementwise kernels give the baseline's bits at every level, but for the
/// LayerNorms' row sums (added in a different order at each width); the GEMM adds in the same
/// order at every level but rounds a*b + c once where the level has FMA (AVX2, AVX-512).
#include <cstddef>

namespace fastmlip::math {

/// An instruction-set level of the kernels. base is the build's own target (SSE2 for the
/// portable x86-64 build, everything -march=native enables with FASTMLIP_ENABLE_NATIVE).
enum class Isa { base = 0, avx2 = 1, avx512 = 2 };
inline constexpr int kNumIsa = 3;

/// "base", "avx2", "avx512".
const char* isa_name(Isa isa);
/// Whether this build has the level's kernels and this CPU (and OS) can run them.
bool isa_available(Isa isa);
/// The level simd_kernels() runs: FASTMLIP_ISA if set (an InputError if unknown, an
/// UnsupportedError if the CPU lacks it), else the best available. Chosen on first use.
Isa active_isa();

/// The kernels of one level, for T = float or double. Rows are contiguous at the given leading
/// dimensions (ld, in elements); n counts values.
template <class T>
struct SimdKernels {
  /// y[r][j] (+)= bias[j] + sum_k x[r][k] M[k][j] for r < rows, j < J; M row-major [K][J].
  /// With accumulate, y is added to and bias is ignored; without, bias may be null (0).
  void (*gemm)(const T* x, int rows, int ldx, int K, const T* M, int J, T* y, int ldy, bool accumulate,
               const T* bias);
  /// out = exp(in) (fast_exp's function); in and out may alias.
  void (*exp)(const T* in, T* out, std::size_t n);
  /// out = 1 / (1 + exp(-in)); in and out may alias.
  void (*sigmoid)(const T* in, T* out, std::size_t n);
  /// s = sigmoid(z), a = z s (silu).
  void (*silu_forward)(const T* z, T* s, T* a, std::size_t n);
  /// g *= silu'(z) = s (1 + z (1 - s)), with s = sigmoid(z).
  void (*silu_backward)(const T* z, const T* s, T* g, std::size_t n);
  /// The gated MLP's output y = silu(c) sigmoid(g), keeping sc = sigmoid(c), sg = sigmoid(g).
  void (*gate_forward)(const T* c, const T* g, T* sc, T* sg, T* y, std::size_t n);
  /// gate_forward's adjoint: gc = gy d y/dc, gg = gy d y/dg.
  void (*gate_backward)(const T* gy, const T* c, const T* sc, const T* sg, T* gc, T* gg, std::size_t n);
  /// torch's LayerNorm over rows of dim (biased variance) in place, y <- gamma yhat + beta,
  /// keeping yhat [rows][dim] and 1/sigma [rows].
  void (*layer_norm_forward)(T* y, T* yhat, T* inv_sigma, const T* gamma, const T* beta, int rows, int dim,
                             T eps);
  /// g <- dL/dy from dL/d(LayerNorm(y)) in place, from layer_norm_forward's yhat and 1/sigma.
  void (*layer_norm_backward)(T* g, const T* yhat, const T* inv_sigma, const T* gamma, int rows, int dim);
  /// dst row t += src row idx[t] - base, t < rows (rows of width values; base: the index of
  /// src's first row, when src is a window on a longer table).
  void (*add_rows)(const T* src, const int* idx, int base, int rows, int width, T* dst);
  /// dst row idx[t] - base += src row t, in order of t (add_rows' adjoint).
  void (*scatter_rows)(const T* src, const int* idx, int base, int rows, int width, T* dst);
};

/// The kernels of the active level (active_isa()).
template <class T>
const SimdKernels<T>& simd_kernels();
/// The kernels of one level; an UnsupportedError if !isa_available(isa). For tests and
/// benchmarks that compare levels.
template <class T>
const SimdKernels<T>& simd_kernels(Isa isa);

#if !defined(FASTMLIP_ISA_TRANSLATION_UNIT)
/// The active level's gemm (SimdKernels::gemm).
template <class T>
inline void gemm(const T* x, int rows, int ldx, int K, const T* M, int J, T* y, int ldy, bool accumulate,
                 const T* bias) {
  simd_kernels<T>().gemm(x, rows, ldx, K, M, J, y, ldy, accumulate, bias);
}
#endif

}  // namespace fastmlip::math
