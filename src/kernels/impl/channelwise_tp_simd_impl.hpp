// SPDX-License-Identifier: MIT
// The row kernels of kernels/channelwise_tp_simd.hpp. No include guard, no includes and no
// namespace of its own, on purpose: each ISA translation unit (kernels/isa/*.cpp) includes this
// text inside an anonymous namespace and compiles it with its level's -m flags, so every
// function here has internal linkage and no level's copy can stand in for another's (see
// math/impl/simd_math_impl.hpp). Hence no standard library either. The loops over channels are
// unit-stride with restrict pointers: the compiler vectorises them at the unit's width.

template <class T, bool Transposed>
void tp_scatter(const fastmlip::kernels::impl::TPEntryDev<T>* cg, int nnz, int mul, const T* y,
                const T* __restrict w, const T* src, T* dst) {
  for (int z = 0; z < nnz; ++z) {
    const auto c = cg[z];
    const T cy = c.value * y[c.j];
    const T* __restrict s = src + (Transposed ? c.k : c.i) * mul;
    T* __restrict d = dst + (Transposed ? c.i : c.k) * mul;
    for (int u = 0; u < mul; ++u) {
      d[u] += cy * w[u] * s[u];
    }
  }
}

template <class T>
void tp_grads(const fastmlip::kernels::impl::TPEntryDev<T>* cg, int nnz, int mul, const T* y,
              const T* __restrict w, const T* x, const T* g, T* __restrict gw, T* gy) {
  // impl/interleaved_sum.hpp's 8 interleaved parts and order, held in registers of the unit's
  // width (GCC vectors): left to the auto-vectoriser, the 8-part loop came out scalar in float at
  // AVX-512, and one 8-wide vector was spilled to memory at the narrower levels.
  constexpr int kParts = 8;
  constexpr int kWidth = fastmlip::math::isa::kUnitRegisterBytes / static_cast<int>(sizeof(T));
  constexpr int kLanes = kWidth < kParts ? kWidth : kParts;
  constexpr int kVecs = kParts / kLanes;  // part p = v kLanes + l lives in lane l of vector v
  typedef T Vec __attribute__((vector_size(kLanes * sizeof(T))));
  for (int z = 0; z < nnz; ++z) {
    const auto c = cg[z];
    const T cy = c.value * y[c.j];
    const T* __restrict xs = x + c.i * mul;
    const T* __restrict gs = g + c.k * mul;
    T sum = T(0);
    int u0 = 0;
    if (mul >= kParts) {
      Vec part[kVecs] = {};
      const Vec cyv = Vec{} + cy;
      for (; u0 + kParts <= mul; u0 += kParts) {
        for (int v = 0; v < kVecs; ++v) {
          const int u = u0 + v * kLanes;
          Vec xv, gv, wv, gwv;
          __builtin_memcpy(&xv, xs + u, sizeof(Vec));
          __builtin_memcpy(&gv, gs + u, sizeof(Vec));
          __builtin_memcpy(&wv, w + u, sizeof(Vec));
          __builtin_memcpy(&gwv, gw + u, sizeof(Vec));
          const Vec xg = xv * gv;
          gwv += cyv * xg;
          part[v] += wv * xg;
          __builtin_memcpy(gw + u, &gwv, sizeof(Vec));
        }
      }
      for (int v = 0; v < kVecs; ++v) {
        for (int l = 0; l < kLanes; ++l) {
          sum += part[v][l];
        }
      }
    }
    for (int u = u0; u < mul; ++u) {
      const T xg = xs[u] * gs[u];
      gw[u] += cy * xg;
      sum += w[u] * xg;
    }
    gy[c.j] += c.value * sum;
  }
}

template <class T>
void hermite_values(const T* y0, int width, const T* h, int n, T* __restrict out) {
  const T* __restrict a = y0;
  const T* __restrict b = y0 + width;
  const T* __restrict c = y0 + 2 * width;
  const T* __restrict d = y0 + 3 * width;
  const T h0 = h[0], h1 = h[1], h2 = h[2], h3 = h[3];
  for (int j = 0; j < n; ++j) {
    out[j] = h0 * a[j] + h1 * b[j] + h2 * c[j] + h3 * d[j];
  }
}

template <class T>
T hermite_dot(const T* y0, int width, const T* h, int n, const T* __restrict g) {
  constexpr int kParts = 8;  // impl/interleaved_sum.hpp's order, held as in tp_grads
  constexpr int kWidth = fastmlip::math::isa::kUnitRegisterBytes / static_cast<int>(sizeof(T));
  constexpr int kLanes = kWidth < kParts ? kWidth : kParts;
  constexpr int kVecs = kParts / kLanes;
  typedef T Vec __attribute__((vector_size(kLanes * sizeof(T))));
  const T* __restrict a = y0;
  const T* __restrict b = y0 + width;
  const T* __restrict c = y0 + 2 * width;
  const T* __restrict d = y0 + 3 * width;
  const T h0 = h[0], h1 = h[1], h2 = h[2], h3 = h[3];
  T sum = T(0);
  int j0 = 0;
  if (n >= kParts) {
    Vec part[kVecs] = {};
    const Vec h0v = Vec{} + h0, h1v = Vec{} + h1, h2v = Vec{} + h2, h3v = Vec{} + h3;
    for (; j0 + kParts <= n; j0 += kParts) {
      for (int v = 0; v < kVecs; ++v) {
        const int j = j0 + v * kLanes;
        Vec av, bv, cv, dv, gv;
        __builtin_memcpy(&av, a + j, sizeof(Vec));
        __builtin_memcpy(&bv, b + j, sizeof(Vec));
        __builtin_memcpy(&cv, c + j, sizeof(Vec));
        __builtin_memcpy(&dv, d + j, sizeof(Vec));
        __builtin_memcpy(&gv, g + j, sizeof(Vec));
        part[v] += gv * (h0v * av + h1v * bv + h2v * cv + h3v * dv);
      }
    }
    for (int v = 0; v < kVecs; ++v) {
      for (int l = 0; l < kLanes; ++l) {
        sum += part[v][l];
      }
    }
  }
  for (int j = j0; j < n; ++j) {
    sum += g[j] * (h0 * a[j] + h1 * b[j] + h2 * c[j] + h3 * d[j]);
  }
  return sum;
}

template <class T>
constexpr fastmlip::kernels::ChannelwiseTPSimd<T> tp_simd_table() {
  return {&tp_scatter<T, false>, &tp_scatter<T, true>, &tp_grads<T>, &hermite_values<T>, &hermite_dot<T>};
}
