// SPDX-License-Identifier: MIT
// The GEMM at level avx2: AVX2 + FMA (16 registers of 32 bytes), compiled with -mavx2 -mfma.
// Internal linkage throughout (math/impl/simd_math_impl.hpp says why); only the table is
// exported. Register blocks (rows x registers) as measured best for CHGNet's shapes.
#define FASTMLIP_ISA_TRANSLATION_UNIT
#include "math/isa/isa_tables.hpp"

namespace fastmlip::math::isa {
namespace {

#include "math/impl/gemm_impl.hpp"
}  // namespace

const GemmTable gemm_avx2 = {&gemm<32, 6, 2, float>, &gemm<32, 4, 2, double>};

}  // namespace fastmlip::math::isa
