// SPDX-License-Identifier: MIT
// The GEMM at level base: the build's own target (SSE2 on portable x86-64: 16 registers of 16 bytes, no FMA).
// Internal linkage throughout (math/impl/simd_math_impl.hpp says why); only the table is
// exported. Register blocks (rows x registers) as measured best for CHGNet's shapes.
#define FASTMLIP_ISA_TRANSLATION_UNIT
#include "math/isa/isa_tables.hpp"

namespace fastmlip::math::isa {
namespace {

#include "math/impl/gemm_impl.hpp"
}  // namespace

const GemmTable gemm_base = {&gemm<kBaseBytes, 3, 4, float>, &gemm<kBaseBytes, 4, 4, double>};

}  // namespace fastmlip::math::isa
