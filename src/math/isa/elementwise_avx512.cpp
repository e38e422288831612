// SPDX-License-Identifier: MIT
// The elementwise kernels at level avx512: AVX-512 F/VL/BW/DQ + FMA (32 registers of 64 bytes), compiled with
// -mavx512f -mavx512vl -mavx512bw -mavx512dq -mavx2 -mfma; and -ffp-contract=off (every level rounds as the
// baseline). Internal linkage throughout (math/impl/simd_math_impl.hpp says why); only the table is exported.
#define FASTMLIP_ISA_TRANSLATION_UNIT
#include "math/isa/isa_tables.hpp"

namespace fastmlip::math::isa {
namespace {

#include "math/impl/elementwise_impl.hpp"
}  // namespace

const ElementwiseTable elementwise_avx512 = {elementwise_kernels<64, float>(),
                                             elementwise_kernels<64, double>()};

}  // namespace fastmlip::math::isa
