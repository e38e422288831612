// SPDX-License-Identifier: MIT
// The elementwise kernels at level avx2: AVX2 + FMA (16 registers of 32 bytes), compiled with -mavx2 -mfma;
// and -ffp-contract=off (every level rounds as the baseline). Internal linkage throughout
// (math/impl/simd_math_impl.hpp says why); only the table is exported.
#define FASTMLIP_ISA_TRANSLATION_UNIT
#include "math/isa/isa_tables.hpp"

namespace fastmlip::math::isa {
namespace {

#include "math/impl/elementwise_impl.hpp"
}  // namespace

const ElementwiseTable elementwise_avx2 = {elementwise_kernels<32, float>(),
                                           elementwise_kernels<32, double>()};

}  // namespace fastmlip::math::isa
