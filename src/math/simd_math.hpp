// SPDX-License-Identifier: MIT
#pragma once
/// \file Elementwise math in SIMD registers for the models' activation loops: libm's exp is a
/// scalar call (7-13 ns per value here), which made the GatedMLPs' sigmoids a fifth of a CHGNet
/// step. The function (math/impl/simd_math_impl.hpp) is within 2 ulp of std::exp
/// (tests/math/test_simd_math.cpp). The array versions run in the widest registers the CPU has
/// (math/simd_kernels.hpp dispatches at run time), and every width gives the same bits as the
/// scalar fast_exp: the kernels are compiled without floating-point contraction.
#include <cstddef>
#include <cstdint>

#if defined(FASTMLIP_ISA_TRANSLATION_UNIT)
// The ISA units must not instantiate this header's external-linkage templates with -mavx*
// flags (see math/impl/simd_math_impl.hpp); they include the impl header directly.
#error "math/simd_math.hpp is not for the ISA translation units (math/isa/)"
#endif

namespace fastmlip::math {

namespace detail {
#include "math/impl/simd_math_impl.hpp"
}  // namespace detail

/// exp(x) for one value, the same function as exp_array's lanes (clamped as exp_impl).
template <class T>
inline T fast_exp(T x) {
  return detail::exp_impl<T, T, detail::SimdInt<T>>(x);
}

/// out[i] = exp(in[i]) for n values; in and out may alias.
void exp_array(const float* in, float* out, std::size_t n);
void exp_array(const double* in, double* out, std::size_t n);

/// out[i] = 1 / (1 + exp(-in[i])) for n values; in and out may alias.
void sigmoid_array(const float* in, float* out, std::size_t n);
void sigmoid_array(const double* in, double* out, std::size_t n);

}  // namespace fastmlip::math
