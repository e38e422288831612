// SPDX-License-Identifier: MIT
// The dense product of math/simd_kernels.hpp, written once over the register width B (bytes)
// and the register block. Like simd_math_impl.hpp: no include guard, no includes, no namespace,
// no standard library calls; included inside an anonymous namespace by each ISA translation
// unit (math/isa/gemm_*.cpp), so each unit's instantiations stay its own.
//
// y[r][j] (+)= bias[j] + sum_k x[r][k] M[k][j], M row-major [K][J]. The columns are cut into
// panels of kV registers, and the rows into blocks of kR: a kR x kV block of y stays in
// registers while k runs, so each loaded row of M serves kR rows of x and y is written once.
// Panels are the outer loop, so one panel of M (K x kV registers, 16 KB for CHGNet's widths in
// float on AVX-512) stays in L1 while every row block passes over it. Columns past the last
// whole panel go through narrower registers, then one column at a time (CHGNet's radial basis
// is 31 wide). The ISA units compile this with contraction on, so a*b + c is one FMA where
// the unit has FMA.

/// A GCC vector of B bytes of T; B == sizeof(T) gives T itself (the one-column tail).
template <int B, class T, bool kScalar = (B == static_cast<int>(sizeof(T)))>
struct VecOf {
  typedef T type __attribute__((vector_size(B)));
};
template <int B, class T>
struct VecOf<B, T, true> {
  using type = T;
};

// GCC's unroll pragma. nvcc's front end, which reads this host code in the device path's build
// (the kokkos-cuda preset), does not know it and warns at every use.
#if defined(__CUDACC__)
#define FASTMLIP_UNROLL16
#else
#define FASTMLIP_UNROLL16 _Pragma("GCC unroll 16")
#endif

/// One kR x kV block of y; x, M, y and bias point at the block's first row and column.
template <class V, int kR, int kV, class T>
inline __attribute__((always_inline)) void gemm_block(const T* x, int ldx, int K, const T* M, int J, T* y,
                                                      int ldy, bool accumulate, const T* bias) {
  constexpr int kL = static_cast<int>(sizeof(V) / sizeof(T));
  V acc[kR][kV];
FASTMLIP_UNROLL16
  for (int r = 0; r < kR; ++r) {
FASTMLIP_UNROLL16
    for (int v = 0; v < kV; ++v) {
      if (accumulate) {
        __builtin_memcpy(&acc[r][v], y + static_cast<long>(r) * ldy + v * kL, sizeof(V));
      } else if (bias) {
        __builtin_memcpy(&acc[r][v], bias + v * kL, sizeof(V));
      } else {
        acc[r][v] = V{};
      }
    }
  }
  for (int k = 0; k < K; ++k) {
    V m[kV];
    const T* mp = M + static_cast<long>(k) * J;
FASTMLIP_UNROLL16
    for (int v = 0; v < kV; ++v) {
      __builtin_memcpy(&m[v], mp + v * kL, sizeof(V));
    }
FASTMLIP_UNROLL16
    for (int r = 0; r < kR; ++r) {
      const V xv = V{} + x[static_cast<long>(r) * ldx + k];
FASTMLIP_UNROLL16
      for (int v = 0; v < kV; ++v) {
        acc[r][v] += xv * m[v];
      }
    }
  }
FASTMLIP_UNROLL16
  for (int r = 0; r < kR; ++r) {
FASTMLIP_UNROLL16
    for (int v = 0; v < kV; ++v) {
      __builtin_memcpy(y + static_cast<long>(r) * ldy + v * kL, &acc[r][v], sizeof(V));
    }
  }
}

/// The rows of one panel (columns j0 .. j0 + kV registers): blocks of kR rows, then the
/// remaining rows in one smaller block.
template <class V, int kR, int kV, class T>
void gemm_panel(const T* x, int rows, int ldx, int K, const T* M, int J, T* y, int ldy, bool accumulate,
                const T* bias, int j0) {
  const T* b = bias ? bias + j0 : nullptr;
  int r = 0;
  for (; r + kR <= rows; r += kR) {
    gemm_block<V, kR, kV>(x + static_cast<long>(r) * ldx, ldx, K, M + j0, J,
                          y + static_cast<long>(r) * ldy + j0, ldy, accumulate, b);
  }
  if constexpr (kR > 1) {
    if (r < rows) {
      // The remainder is fewer than kR rows: split it in halves of the block (at most
      // log2(kR) more calls) rather than one row at a time.
      constexpr int kHalf = kR / 2 > 0 ? kR / 2 : 1;
      gemm_panel<V, kHalf, kV>(x + static_cast<long>(r) * ldx, rows - r, ldx, K, M, J,
                               y + static_cast<long>(r) * ldy, ldy, accumulate, bias, j0);
    }
  }
}

/// Columns from j0 on in single registers of B bytes, then narrower ones, then one by one.
template <int B, int kR, class T>
void gemm_tail(const T* x, int rows, int ldx, int K, const T* M, int J, T* y, int ldy, bool accumulate,
               const T* bias, int j0) {
  if constexpr (B >= 16 && B >= 2 * static_cast<int>(sizeof(T))) {
    using V = typename VecOf<B, T>::type;
    constexpr int kL = B / static_cast<int>(sizeof(T));
    for (; j0 + kL <= J; j0 += kL) {
      gemm_panel<V, kR, 1>(x, rows, ldx, K, M, J, y, ldy, accumulate, bias, j0);
    }
    gemm_tail<B / 2, kR, T>(x, rows, ldx, K, M, J, y, ldy, accumulate, bias, j0);
  } else {
    for (; j0 < J; ++j0) {
      gemm_panel<T, kR, 1>(x, rows, ldx, K, M, J, y, ldy, accumulate, bias, j0);
    }
  }
}

/// The product over all of y: panels of kV registers of B bytes, blocks of kR rows.
template <int B, int kR, int kV, class T>
void gemm(const T* x, int rows, int ldx, int K, const T* M, int J, T* y, int ldy, bool accumulate,
          const T* bias) {
  if (rows <= 0 || J <= 0) {
    return;
  }
  if (K <= 0) {
    // An empty sum, whose x and M may have no storage (an empty vector's null data()): no
    // pointer into them is formed, since offsetting a null pointer is undefined (clang's
    // UndefinedBehaviorSanitizer stops there). y keeps its values, or becomes the bias or zero,
    // the bits the blocks below give.
    if (!accumulate) {
      for (int r = 0; r < rows; ++r) {
        for (int j = 0; j < J; ++j) {
          y[static_cast<long>(r) * ldy + j] = bias ? bias[j] : T(0);
        }
      }
    }
    return;
  }
  using V = typename VecOf<B, T>::type;
  constexpr int kJ = kV * B / static_cast<int>(sizeof(T));
  int j0 = 0;
  for (; j0 + kJ <= J; j0 += kJ) {
    gemm_panel<V, kR, kV>(x, rows, ldx, K, M, J, y, ldy, accumulate, bias, j0);
  }
  gemm_tail<B, kR>(x, rows, ldx, K, M, J, y, ldy, accumulate, bias, j0);
}
