// SPDX-License-Identifier: MIT
// Run-time selection of the kernel level (math/simd_kernels.hpp). Compiled for the build's own
// target: it only reads CPU features and copies function addresses out of the ISA units' tables.
#include "math/simd_kernels.hpp"

#include <array>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "math/isa/isa_tables.hpp"
#include "math/simd_math.hpp"

namespace fastmlip::math {

namespace {

bool cpu_supports(Isa isa) {
  switch (isa) {
    case Isa::base:
      return true;
#if defined(__x86_64__) || defined(__i386__)
    case Isa::avx2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      // libgcc's check includes the OS saving the AVX-512 state (XCR0).
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    default:
      return false;
  }
}

bool compiled(Isa isa) {
  switch (isa) {
    case Isa::base:
      return true;
    case Isa::avx2:
#if defined(FASTMLIP_HAVE_ISA_AVX2)
      return true;
#else
      return false;
#endif
    case Isa::avx512:
#if defined(FASTMLIP_HAVE_ISA_AVX512)
      return true;
#else
      return false;
#endif
  }
  return false;
}

template <class T>
SimdKernels<T> assemble(const isa::GemmTable& gemm, const isa::ElementwiseTable& elementwise) {
  SimdKernels<T> k;
  if constexpr (sizeof(T) == 4) {
    k = elementwise.f32;
    k.gemm = gemm.f32;
  } else {
    k = elementwise.f64;
    k.gemm = gemm.f64;
  }
  return k;
}

/// Every compiled level's table, index Isa; levels not compiled in hold the baseline's (never
/// handed out: simd_kernels(isa) checks isa_available first).
template <class T>
const std::array<SimdKernels<T>, kNumIsa>& tables() {
  static const std::array<SimdKernels<T>, kNumIsa> t = [] {
    std::array<SimdKernels<T>, kNumIsa> a;
    a.fill(assemble<T>(isa::gemm_base, isa::elementwise_base));
#if defined(FASTMLIP_HAVE_ISA_AVX2)
    a[static_cast<int>(Isa::avx2)] = assemble<T>(isa::gemm_avx2, isa::elementwise_avx2);
#endif
#if defined(FASTMLIP_HAVE_ISA_AVX512)
    a[static_cast<int>(Isa::avx512)] = assemble<T>(isa::gemm_avx512, isa::elementwise_avx512);
#endif
    return a;
  }();
  return t;
}

Isa choose() {
  const char* env = std::getenv("FASTMLIP_ISA");
  if (env == nullptr || *env == '\0') {
    for (Isa isa : {Isa::avx512, Isa::avx2}) {
      if (isa_available(isa)) {
        return isa;
      }
    }
    return Isa::base;
  }
  const std::string want(env);
  Isa isa;
  if (want == "base" || want == "sse2") {
    isa = Isa::base;
  } else if (want == "avx2") {
    isa = Isa::avx2;
  } else if (want == "avx512") {
    isa = Isa::avx512;
  } else {
    throw InputError("FASTMLIP_ISA=" + want +
                     ": expected base (or sse2), avx2 or avx512, or unset for the best the "
                     "CPU supports");
  }
  if (!isa_available(isa)) {
    throw UnsupportedError(
        "FASTMLIP_ISA=" + want + ": " +
        (compiled(isa) ? "this CPU does not support it" : "this build has no such kernels") +
        "; unset FASTMLIP_ISA to use the best level available");
  }
  return isa;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::base:
      return "base";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "unknown";
}

bool isa_available(Isa isa) { return compiled(isa) && cpu_supports(isa); }

Isa active_isa() {
  static const Isa isa = choose();
  return isa;
}

template <class T>
const SimdKernels<T>& simd_kernels() {
  static const SimdKernels<T>& k = tables<T>()[static_cast<int>(active_isa())];
  return k;
}

template <class T>
const SimdKernels<T>& simd_kernels(Isa isa) {
  if (!isa_available(isa)) {
    throw UnsupportedError(std::string("simd_kernels: level ") + isa_name(isa) + " is " +
                           (compiled(isa) ? "not supported by this CPU" : "not compiled into this build") +
                           " (check isa_available first)");
  }
  return tables<T>()[static_cast<int>(isa)];
}

template const SimdKernels<float>& simd_kernels<float>();
template const SimdKernels<double>& simd_kernels<double>();
template const SimdKernels<float>& simd_kernels<float>(Isa);
template const SimdKernels<double>& simd_kernels<double>(Isa);

void exp_array(const float* in, float* out, std::size_t n) { simd_kernels<float>().exp(in, out, n); }
void exp_array(const double* in, double* out, std::size_t n) { simd_kernels<double>().exp(in, out, n); }
void sigmoid_array(const float* in, float* out, std::size_t n) { simd_kernels<float>().sigmoid(in, out, n); }
void sigmoid_array(const double* in, double* out, std::size_t n) {
  simd_kernels<double>().sigmoid(in, out, n);
}

}  // namespace fastmlip::math
