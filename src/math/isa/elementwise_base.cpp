// SPDX-License-Identifier: MIT
// The elementwise kernels at level base: the build's own target (SSE2 on portable x86-64: 16 registers of 16
// bytes, no FMA); and -ffp-contract=off (every level rounds as the baseline). Internal linkage throughout
// (math/impl/simd_math_impl.hpp says why); only the table is exported.
#define FASTMLIP_ISA_TRANSLATION_UNIT
#include "math/isa/isa_tables.hpp"

namespace fastmlip::math::isa {
namespace {

#include "math/impl/elementwise_impl.hpp"
}  // namespace

const ElementwiseTable elementwise_base = {elementwise_kernels<kBaseBytes, float>(),
                                           elementwise_kernels<kBaseBytes, double>()};

}  // namespace fastmlip::math::isa
