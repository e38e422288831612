// SPDX-License-Identifier: MIT
// The elementwise kernels of math/simd_kernels.hpp (the gated MLPs' activations, LayerNorms and
// row gathers), written once over the register width B (bytes). Like simd_math_impl.hpp (whose
// text it takes in, in the same namespace): no include guard, no namespace, no standard library
// calls; included inside an anonymous namespace by each ISA translation unit
// (math/isa/elementwise_*.cpp), compiled with -ffp-contract=off. So every lane rounds as the
// scalar tail does, every ISA gives the same bits as the baseline for every kernel but the
// LayerNorms (their row sums are added in a different order at each width), and exp and
// sigmoid give fast_exp's bits.
#include "math/impl/simd_math_impl.hpp"

/// Lane loop: f(tag, i) for i = 0, L, 2L, ... with tag's Vec a vector of B bytes (Int its
/// shape in integers), then for each remaining i with Vec = T (the same arithmetic on one
/// lane). The vector types are members of a class template: GCC drops the vector_size of a
/// local typedef passed as a template argument.
template <int B, class T>
struct Vectors {
  typedef T Vec __attribute__((vector_size(B)));
  typedef SimdInt<T> Int __attribute__((vector_size(B)));
};
template <int B, class T, bool kScalar = (B == static_cast<int>(sizeof(T)))>
struct VecOrScalar {
  using type = typename Vectors<B, T>::Vec;
};
template <int B, class T>
struct VecOrScalar<B, T, true> {
  using type = T;
};
template <class T>
struct Scalars {
  using Vec = T;
  using Int = SimdInt<T>;
};
template <class V, class T>
inline V load(const T* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}
template <class V, class T>
inline void store(T* p, V v) {
  __builtin_memcpy(p, &v, sizeof(V));
}
template <int B, class T, class F>
inline __attribute__((always_inline)) void for_lanes(std::size_t n, F f) {
  constexpr std::size_t kL = B / sizeof(T);
  std::size_t i = 0;
  for (; i + kL <= n; i += kL) {
    f(Vectors<B, T>{}, i);
  }
  for (; i < n; ++i) {
    f(Scalars<T>{}, i);
  }
}

template <int B, class T>
void exp_array(const T* in, T* out, std::size_t n) {
  for_lanes<B, T>(n, [&](auto tag, std::size_t i) {
    using V = typename decltype(tag)::Vec;
    using VI = typename decltype(tag)::Int;
    store(out + i, exp_impl<T, V, VI>(load<V>(in + i)));
  });
}

template <int B, class T>
void sigmoid_array(const T* in, T* out, std::size_t n) {
  for_lanes<B, T>(n, [&](auto tag, std::size_t i) {
    using V = typename decltype(tag)::Vec;
    using VI = typename decltype(tag)::Int;
    store(out + i, sigmoid_impl<T, V, VI>(load<V>(in + i)));
  });
}

template <int B, class T>
void silu_forward(const T* z, T* s, T* a, std::size_t n) {
  for_lanes<B, T>(n, [&](auto tag, std::size_t i) {
    using V = typename decltype(tag)::Vec;
    using VI = typename decltype(tag)::Int;
    const V zv = load<V>(z + i);
    const V sv = sigmoid_impl<T, V, VI>(zv);
    store(s + i, sv);
    store(a + i, zv * sv);
  });
}

template <int B, class T>
void silu_backward(const T* z, const T* s, T* g, std::size_t n) {
  for_lanes<B, T>(n, [&](auto tag, std::size_t i) {
    using V = typename decltype(tag)::Vec;
    const V zv = load<V>(z + i), sv = load<V>(s + i);
    store(g + i, load<V>(g + i) * (sv * (T(1) + zv * (T(1) - sv))));
  });
}

template <int B, class T>
void gate_forward(const T* c, const T* g, T* sc, T* sg, T* y, std::size_t n) {
  for_lanes<B, T>(n, [&](auto tag, std::size_t i) {
    using V = typename decltype(tag)::Vec;
    using VI = typename decltype(tag)::Int;
    const V cv = load<V>(c + i);
    const V scv = sigmoid_impl<T, V, VI>(cv), sgv = sigmoid_impl<T, V, VI>(load<V>(g + i));
    store(sc + i, scv);
    store(sg + i, sgv);
    store(y + i, cv * scv * sgv);
  });
}

template <int B, class T>
void gate_backward(const T* gy, const T* c, const T* sc, const T* sg, T* gc, T* gg, std::size_t n) {
  for_lanes<B, T>(n, [&](auto tag, std::size_t i) {
    using V = typename decltype(tag)::Vec;
    const V gyv = load<V>(gy + i), cv = load<V>(c + i), scv = load<V>(sc + i), sgv = load<V>(sg + i);
    // silu'(c) = s (1 + c (1 - s)), sigmoid'(g) = s (1 - s)
    store(gc + i, gyv * sgv * scv * (T(1) + cv * (T(1) - scv)));
    store(gg + i, gyv * (cv * scv) * sgv * (T(1) - sgv));
  });
}

/// Sum of the lanes of a vector (or the value itself), as a tree of half-width additions (a
/// few shuffles and adds, where a lane-by-lane loop is a chain of 16 dependent adds).
template <class T, class V>
inline T lane_sum(V v) {
  if constexpr (sizeof(V) == sizeof(T)) {
    return v;
  } else {
    using H = typename VecOrScalar<static_cast<int>(sizeof(V) / 2), T>::type;
    H lo, hi;
    __builtin_memcpy(&lo, &v, sizeof(H));
    __builtin_memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof(H), sizeof(H));
    return lane_sum<T>(lo + hi);
  }
}

/// sum_j a[j] over one row, in registers of B bytes.
template <int B, class T>
inline T row_sum(const T* a, int dim) {
  using V = typename Vectors<B, T>::Vec;
  constexpr int kL = B / static_cast<int>(sizeof(T));
  V acc{};
  int j = 0;
  for (; j + kL <= dim; j += kL) {
    acc += load<V>(a + j);
  }
  T s = lane_sum<T>(acc);
  for (; j < dim; ++j) {
    s += a[j];
  }
  return s;
}

/// sum_j a[j] b[j] over one row, in registers of B bytes.
template <int B, class T>
inline T row_dot(const T* a, const T* b, int dim) {
  using V = typename Vectors<B, T>::Vec;
  constexpr int kL = B / static_cast<int>(sizeof(T));
  V acc{};
  int j = 0;
  for (; j + kL <= dim; j += kL) {
    acc += load<V>(a + j) * load<V>(b + j);
  }
  T s = lane_sum<T>(acc);
  for (; j < dim; ++j) {
    s += a[j] * b[j];
  }
  return s;
}

/// LayerNorm over rows of dim (torch's: biased variance): y <- gamma yhat + beta in place,
/// keeping yhat and 1/sigma per row for the reverse.
template <int B, class T>
void layer_norm_forward(T* y, T* yhat, T* inv_sigma, const T* gamma, const T* beta, int rows, int dim,
                        T eps) {
  for (int r = 0; r < rows; ++r) {
    T* yr = y + static_cast<long>(r) * dim;
    T* hr = yhat + static_cast<long>(r) * dim;
    const T mean = row_sum<B>(yr, dim) / static_cast<T>(dim);
    for_lanes<B, T>(static_cast<std::size_t>(dim), [&](auto tag, std::size_t j) {
      using V = typename decltype(tag)::Vec;
      store(hr + j, load<V>(yr + j) - mean);
    });
    const T var = row_dot<B>(hr, hr, dim) / static_cast<T>(dim);
    const T inv = T(1) / __builtin_sqrt(var + eps);
    for_lanes<B, T>(static_cast<std::size_t>(dim), [&](auto tag, std::size_t j) {
      using V = typename decltype(tag)::Vec;
      const V h = load<V>(hr + j) * inv;
      store(hr + j, h);
      store(yr + j, h * load<V>(gamma + j) + load<V>(beta + j));
    });
    inv_sigma[r] = inv;
  }
}

/// g <- dL/dy from dL/d(LN(y)) over rows of dim, in place.
template <int B, class T>
void layer_norm_backward(T* g, const T* yhat, const T* inv_sigma, const T* gamma, int rows, int dim) {
  for (int r = 0; r < rows; ++r) {
    T* gr = g + static_cast<long>(r) * dim;
    const T* hr = yhat + static_cast<long>(r) * dim;
    for_lanes<B, T>(static_cast<std::size_t>(dim), [&](auto tag, std::size_t j) {
      using V = typename decltype(tag)::Vec;
      store(gr + j, load<V>(gr + j) * load<V>(gamma + j));
    });
    const T m1 = row_sum<B>(gr, dim) / static_cast<T>(dim);
    const T m2 = row_dot<B>(gr, hr, dim) / static_cast<T>(dim);
    const T inv = inv_sigma[r];
    for_lanes<B, T>(static_cast<std::size_t>(dim), [&](auto tag, std::size_t j) {
      using V = typename decltype(tag)::Vec;
      store(gr + j, inv * (load<V>(gr + j) - m1 - load<V>(hr + j) * m2));
    });
  }
}

/// dst row t += src row idx[t] - base (rows of width values).
template <int B, class T>
void add_rows(const T* src, const int* idx, int base, int rows, int width, T* dst) {
  for (int t = 0; t < rows; ++t) {
    const T* s = src + static_cast<long>(idx[t] - base) * width;
    T* d = dst + static_cast<long>(t) * width;
    for_lanes<B, T>(static_cast<std::size_t>(width), [&](auto tag, std::size_t j) {
      using V = typename decltype(tag)::Vec;
      store(d + j, load<V>(d + j) + load<V>(s + j));
    });
  }
}

/// dst row idx[t] - base += src row t: the adjoint of add_rows (rows in order, so repeated
/// indices add up in the same order at every width).
template <int B, class T>
void scatter_rows(const T* src, const int* idx, int base, int rows, int width, T* dst) {
  for (int t = 0; t < rows; ++t) {
    const T* s = src + static_cast<long>(t) * width;
    T* d = dst + static_cast<long>(idx[t] - base) * width;
    for_lanes<B, T>(static_cast<std::size_t>(width), [&](auto tag, std::size_t j) {
      using V = typename decltype(tag)::Vec;
      store(d + j, load<V>(d + j) + load<V>(s + j));
    });
  }
}

/// This unit's elementwise kernels for registers of B bytes (SimdKernels without the gemm).
template <int B, class T>
constexpr SimdKernels<T> elementwise_kernels() {
  SimdKernels<T> k{};
  k.exp = &exp_array<B, T>;
  k.sigmoid = &sigmoid_array<B, T>;
  k.silu_forward = &silu_forward<B, T>;
  k.silu_backward = &silu_backward<B, T>;
  k.gate_forward = &gate_forward<B, T>;
  k.gate_backward = &gate_backward<B, T>;
  k.layer_norm_forward = &layer_norm_forward<B, T>;
  k.layer_norm_backward = &layer_norm_backward<B, T>;
  k.add_rows = &add_rows<B, T>;
  k.scatter_rows = &scatter_rows<B, T>;
  return k;
}
