// SPDX-License-Identifier: MIT
#pragma once
// The tables each ISA translation unit of kernels/isa/ defines, read by kernels/row_kernels.cpp
// only: constant-initialised function addresses, so nothing of a unit runs before the
// dispatcher has checked that the CPU supports its level.
#include "kernels/channelwise_tp_simd.hpp"
#include "kernels/symmetric_contraction_simd.hpp"
#include "math/isa/register_bytes.hpp"

namespace fastmlip::kernels::isa {

struct RowKernelsTable {
  ChannelwiseTPSimd<float> tp_f32;
  ChannelwiseTPSimd<double> tp_f64;
  SymmetricContractionSimd<float> sc_f32;
  SymmetricContractionSimd<double> sc_f64;
};

// Declared unconditionally (a definition must see its extern declaration); the avx2 and avx512
// units exist on x86-64 only (FASTMLIP_HAVE_ISA_AVX2 / _AVX512 on the dispatcher then).
extern const RowKernelsTable row_kernels_base;
extern const RowKernelsTable row_kernels_avx2;
extern const RowKernelsTable row_kernels_avx512;

}  // namespace fastmlip::kernels::isa
