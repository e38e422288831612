// SPDX-License-Identifier: MIT
#pragma once
/// \file Elementwise math in SIMD registers for the models' activation loops: libm's exp is a
/// scalar call (7-13 ns per value here), which made the GatedMLPs' sigmoids a fifth of a CHGNet
/// step. exp is evaluated as 2^n e^r with r = x - n ln2 in [-ln2/2, ln2/2]: for float, a
/// degree-6 polynomial for e^r; for double, a rational (Pade) form; ln2 split in two parts so
/// that r is exact. Both are within 2 ulp of std::exp (tests/math/test_simd_math.cpp), and
/// GCC/Clang vector extensions make them SSE2 on the portable build, AVX/AVX-512 with
/// FASTMLIP_ENABLE_NATIVE. 2^n is built in the exponent bits directly: adding 1.5 x 2^23
/// (2^52) leaves n + bias in the low mantissa bits, which one shift moves into the exponent.
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace fastmlip::math {

/// Bytes of one SIMD register of the build's target.
#if defined(__AVX512F__)
inline constexpr int kSimdBytes = 64;
#elif defined(__AVX__)
inline constexpr int kSimdBytes = 32;
#else
inline constexpr int kSimdBytes = 16;
#endif

namespace detail {

/// exp(x) for U = T or a GCC vector of T; UI is U's shape in integers of T's width. Arguments
/// are clamped to [-87, 88] (float) or [-708, 709] (double), where exp stays a normal number.
template <class T, class U, class UI>
inline U exp_impl(U x) {
  if constexpr (std::is_same_v<T, float>) {
    x = x < T(-87) ? U{} + T(-87) : x;
    x = x > T(88) ? U{} + T(88) : x;
    const U n = (x * T(1.44269504088896341) + T(12582912.0)) - T(12582912.0);
    const U r = (x - n * T(0.693359375)) + n * T(2.12194440e-4);
    U p = r * T(1.9875691500e-4) + T(1.3981999507e-3);
    p = p * r + T(8.3334519073e-3);
    p = p * r + T(4.1665795894e-2);
    p = p * r + T(1.6666665459e-1);
    p = p * r + T(5.0000001201e-1);
    p = p * r * r + r + T(1);
    const U biased = n + T(12582912.0 + 127.0);
    UI bits;
    std::memcpy(&bits, &biased, sizeof(U));
    bits = bits << 23;
    U scale;
    std::memcpy(&scale, &bits, sizeof(U));
    return p * scale;
  } else {
    x = x < T(-708) ? U{} + T(-708) : x;
    x = x > T(709) ? U{} + T(709) : x;
    const U n = (x * T(1.4426950408889634074) + T(6755399441055744.0)) - T(6755399441055744.0);
    const U r = (x - n * T(6.93145751953125e-1)) - n * T(1.42860682030941723212e-6);
    const U rr = r * r;
    const U px = r * ((rr * T(1.26177193074810590878e-4) + T(3.02994407707441961300e-2)) * rr +
                      T(9.99999999999999999910e-1));
    const U q = ((rr * T(3.00198505138664455042e-6) + T(2.52448340349684104192e-3)) * rr +
                 T(2.27265548208155028766e-1)) * rr + T(2.0);
    const U e = T(1) + T(2) * px / (q - px);
    const U biased = n + T(6755399441055744.0 + 1023.0);
    UI bits;
    std::memcpy(&bits, &biased, sizeof(U));
    bits = bits << 52;
    U scale;
    std::memcpy(&scale, &bits, sizeof(U));
    return e * scale;
  }
}

/// Unsigned: the shift pushes the magic constant's exponent bits out of the word, which is
/// defined for unsigned integers only.
template <class T>
using SimdInt = std::conditional_t<std::is_same_v<T, float>, std::uint32_t, std::uint64_t>;

/// The elementwise functions, for U = T or a GCC vector of T (UI: U's shape in integers).
struct ExpOp {
  template <class T, class U, class UI>
  static U apply(U x) {
    return exp_impl<T, U, UI>(x);
  }
};
struct SigmoidOp {
  template <class T, class U, class UI>
  static U apply(U x) {
    return T(1) / (T(1) + exp_impl<T, U, UI>(-x));
  }
};

/// out[i] = Op(in[i]) for n values, a SIMD register at a time, then the scalar tail (the same
/// function on one lane); in and out may alias.
template <class Op, class T>
void map_array(const T* in, T* out, std::size_t n) {
  typedef T V __attribute__((vector_size(kSimdBytes)));
  typedef SimdInt<T> VI __attribute__((vector_size(kSimdBytes)));
  constexpr std::size_t kL = kSimdBytes / sizeof(T);
  std::size_t i = 0;
  for (; i + kL <= n; i += kL) {
    V x;
    std::memcpy(&x, in + i, sizeof(V));
    const V y = Op::template apply<T, V, VI>(x);
    std::memcpy(out + i, &y, sizeof(V));
  }
  for (; i < n; ++i) out[i] = Op::template apply<T, T, SimdInt<T>>(in[i]);
}

}  // namespace detail

/// exp(x) for one value, the same function as exp_array's lanes (clamped as exp_impl).
template <class T>
inline T fast_exp(T x) {
  return detail::ExpOp::apply<T, T, detail::SimdInt<T>>(x);
}

/// out[i] = exp(in[i]) for n values; in and out may alias.
template <class T>
void exp_array(const T* in, T* out, std::size_t n) {
  detail::map_array<detail::ExpOp>(in, out, n);
}

/// out[i] = 1 / (1 + exp(-in[i])) for n values; in and out may alias.
template <class T>
void sigmoid_array(const T* in, T* out, std::size_t n) {
  detail::map_array<detail::SigmoidOp>(in, out, n);
}

}  // namespace fastmlip::math
