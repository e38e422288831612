// SPDX-License-Identifier: MIT
// The GEMM at level avx512: AVX-512 F/VL/BW/DQ + FMA (32 registers of 64 bytes), compiled with -mavx512f
// -mavx512vl -mavx512bw -mavx512dq -mavx2 -mfma. Internal linkage throughout (math/impl/simd_math_impl.hpp
// says why); only the table is exported. Register blocks (rows x registers) as measured best for CHGNet's
// shapes.
#define FASTMLIP_ISA_TRANSLATION_UNIT
#include "math/isa/isa_tables.hpp"

namespace fastmlip::math::isa {
namespace {

#include "math/impl/gemm_impl.hpp"
}  // namespace

const GemmTable gemm_avx512 = {&gemm<64, 8, 2, float>, &gemm<64, 8, 2, double>};

}  // namespace fastmlip::math::isa
