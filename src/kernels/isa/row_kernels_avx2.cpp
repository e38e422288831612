// SPDX-License-Identifier: MIT
// The host row kernels of the channelwise TP and the symmetric contraction at level avx2:
// AVX2 (+ FMA, unused: no contraction), compiled with -mavx2 -mfma. Internal linkage throughout
// (impl/channelwise_tp_simd_impl.hpp says why); only the table is exported.
#define FASTMLIP_ISA_TRANSLATION_UNIT
#include "kernels/isa/isa_tables.hpp"

namespace fastmlip::kernels::isa {
namespace {

#include "kernels/impl/channelwise_tp_simd_impl.hpp"
#include "kernels/impl/symmetric_contraction_simd_impl.hpp"
}  // namespace

const RowKernelsTable row_kernels_avx2 = {tp_simd_table<float>(), tp_simd_table<double>(),
                                          sc_simd_table<float>(), sc_simd_table<double>()};

}  // namespace fastmlip::kernels::isa
