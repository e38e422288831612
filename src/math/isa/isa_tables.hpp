// SPDX-License-Identifier: MIT
#pragma once
// The kernel tables each ISA translation unit of math/isa/ defines, read by math/simd_kernels.cpp
// only. They are constant-initialised data (function addresses), so nothing of an ISA unit runs
// until the dispatcher has checked that the CPU supports it.
#include <cstddef>
#include <cstdint>

#include "math/isa/register_bytes.hpp"
#include "math/simd_kernels.hpp"

namespace fastmlip::math::isa {

/// The GEMM of one level (math/impl/gemm_impl.hpp), compiled with contraction on (FMA).
struct GemmTable {
  decltype(SimdKernels<float>::gemm) f32;
  decltype(SimdKernels<double>::gemm) f64;
};
/// The elementwise kernels of one level (math/impl/elementwise_impl.hpp; gemm null), compiled
/// with -ffp-contract=off.
struct ElementwiseTable {
  SimdKernels<float> f32;
  SimdKernels<double> f64;
};

/// Register width (bytes) of the base level: the build's own target.
constexpr int kBaseBytes = kUnitRegisterBytes;

// Declared unconditionally: a definition must see its extern declaration (a namespace-scope
// const would otherwise have internal linkage). The avx2 and avx512 units are built only for
// x86-64 (FASTMLIP_HAVE_ISA_AVX2 / _AVX512 on math/simd_kernels.cpp then).
extern const GemmTable gemm_base;
extern const ElementwiseTable elementwise_base;
extern const GemmTable gemm_avx2;
extern const ElementwiseTable elementwise_avx2;
extern const GemmTable gemm_avx512;
extern const ElementwiseTable elementwise_avx512;

}  // namespace fastmlip::math::isa
