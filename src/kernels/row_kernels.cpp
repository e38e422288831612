// SPDX-License-Identifier: MIT
// Run-time selection of the host row kernels (channelwise_tp_simd.hpp,
// symmetric_contraction_simd.hpp), compiled for the build's own target: it only picks a
// level's table by math::active_isa().
#include <string>

#include "core/error.hpp"
#include "kernels/channelwise_tp_simd.hpp"
#include "kernels/isa/isa_tables.hpp"
#include "kernels/symmetric_contraction_simd.hpp"

namespace fastmlip::kernels {

namespace {

const isa::RowKernelsTable& table(const char* who, math::Isa level) {
  if (!math::isa_available(level)) {
    throw UnsupportedError(std::string(who) + ": level " + math::isa_name(level) +
                           " is not available in this build on this CPU");
  }
  switch (level) {
#if defined(FASTMLIP_HAVE_ISA_AVX2)
    case math::Isa::avx2:
      return isa::row_kernels_avx2;
#endif
#if defined(FASTMLIP_HAVE_ISA_AVX512)
    case math::Isa::avx512:
      return isa::row_kernels_avx512;
#endif
    default:
      return isa::row_kernels_base;
  }
}

}  // namespace

template <class T>
const ChannelwiseTPSimd<T>& channelwise_tp_simd(math::Isa level) {
  const auto& t = table("channelwise_tp_simd", level);
  if constexpr (sizeof(T) == 4) {
    return t.tp_f32;
  } else {
    return t.tp_f64;
  }
}

template <class T>
const ChannelwiseTPSimd<T>& channelwise_tp_simd() {
  static const ChannelwiseTPSimd<T>& k = channelwise_tp_simd<T>(math::active_isa());
  return k;
}

template <class T>
const SymmetricContractionSimd<T>& symmetric_contraction_simd(math::Isa level) {
  const auto& t = table("symmetric_contraction_simd", level);
  if constexpr (sizeof(T) == 4) {
    return t.sc_f32;
  } else {
    return t.sc_f64;
  }
}

template <class T>
const SymmetricContractionSimd<T>& symmetric_contraction_simd() {
  static const SymmetricContractionSimd<T>& k = symmetric_contraction_simd<T>(math::active_isa());
  return k;
}

template const ChannelwiseTPSimd<float>& channelwise_tp_simd<float>();
template const ChannelwiseTPSimd<double>& channelwise_tp_simd<double>();
template const ChannelwiseTPSimd<float>& channelwise_tp_simd<float>(math::Isa);
template const ChannelwiseTPSimd<double>& channelwise_tp_simd<double>(math::Isa);
template const SymmetricContractionSimd<float>& symmetric_contraction_simd<float>();
template const SymmetricContractionSimd<double>& symmetric_contraction_simd<double>();
template const SymmetricContractionSimd<float>& symmetric_contraction_simd<float>(math::Isa);
template const SymmetricContractionSimd<double>& symmetric_contraction_simd<double>(math::Isa);

}  // namespace fastmlip::kernels
