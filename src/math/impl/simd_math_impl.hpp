// SPDX-License-Identifier: MIT
// The vector exp of math/simd_math.hpp, for U = T or a GCC vector of T. No include guard, no
// includes and no namespace of its own, on purpose: this text is included inside a namespace
// by simd_math.hpp (the build's own target) and inside an anonymous namespace by each ISA
// translation unit (math/isa/*.cpp, compiled with -mavx2 / -mavx512f). There every
// instantiation has internal linkage, so the linker can never merge an AVX-512 copy of a
// function with the baseline one and run it on a CPU without AVX-512. Hence also no standard
// library calls here, only builtins: an inline std:: function instantiated in an ISA unit
// would be such a shared copy. The includer provides <cstddef> and <cstdint>.
//
// exp is evaluated as 2^n e^r with r = x - n ln2 in [-ln2/2, ln2/2]: for float, a degree-6
// polynomial for e^r; for double, a rational (Pade) form; ln2 split in two parts so that r is
// exact. 2^n is built in the exponent bits directly: adding 1.5 x 2^23 (2^52) leaves n + bias
// in the low mantissa bits, which one shift moves into the exponent. The ISA units compile this
// with -ffp-contract=off, so every lane of every ISA rounds as the scalar fast_exp does.

/// Unsigned integers of T's width: the shift pushes the magic constant's exponent bits out of
/// the word, which is defined for unsigned integers only.
template <class T>
struct SimdIntOf;
template <>
struct SimdIntOf<float> {
  using type = std::uint32_t;
};
template <>
struct SimdIntOf<double> {
  using type = std::uint64_t;
};
template <class T>
using SimdInt = typename SimdIntOf<T>::type;

/// exp(x) for U = T or a GCC vector of T; UI is U's shape in integers of T's width. Arguments
/// are clamped to [-87, 88] (float) or [-708, 709] (double), where exp stays a normal number.
template <class T, class U, class UI>
inline U exp_impl(U x) {
  if constexpr (sizeof(T) == 4) {
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
    __builtin_memcpy(&bits, &biased, sizeof(U));
    bits = bits << 23;
    U scale;
    __builtin_memcpy(&scale, &bits, sizeof(U));
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
                 T(2.27265548208155028766e-1)) *
                    rr +
                T(2.0);
    const U e = T(1) + T(2) * px / (q - px);
    const U biased = n + T(6755399441055744.0 + 1023.0);
    UI bits;
    __builtin_memcpy(&bits, &biased, sizeof(U));
    bits = bits << 52;
    U scale;
    __builtin_memcpy(&scale, &bits, sizeof(U));
    return e * scale;
  }
}

/// The logistic function through exp_impl, for U = T or a GCC vector of T.
template <class T, class U, class UI>
inline U sigmoid_impl(U x) {
  return T(1) / (T(1) + exp_impl<T, U, UI>(-x));
}
