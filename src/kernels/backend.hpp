// SPDX-License-Identifier: MIT
#pragma once
/// \file Which implementation runs a kernel that has several: one entry point per kernel (the
/// Kokkos class, e.g. ChannelwiseTPKokkos), its backend picked at construction.
///
///  - Backend::kokkos: the Kokkos functors of kernels/impl/, on any execution space. The
///    default everywhere: the path CI tests daily, on the host and, compiled by a Kokkos-CUDA,
///    on the GPU.
///  - Backend::cuda: the hand-written CUDA kernels of kernels/cuda/, behind the same entry
///    points, for the channelwise TP (weights per edge; the tabulated-weights variant stays on
///    Kokkos) and the symmetric contraction (forward and input gradient; the trainer's weight
///    gradient stays on Kokkos). Needs a Kokkos::Cuda execution space in a build with
///    FASTMLIP_ENABLE_CUDA, and float or double. It becomes the default on NVIDIA GPUs only
///    after scripts/gpu-check.sh has compared it with the Kokkos path on a GPU.
#include <Kokkos_Core.hpp>
#include <string>
#include <type_traits>

#include "core/error.hpp"

namespace fastmlip::kernels {

enum class Backend { kokkos, cuda };

inline const char* backend_name(Backend b) { return b == Backend::cuda ? "cuda" : "kokkos"; }

/// "kokkos" or "cuda"; InputError naming `who` and the choices otherwise.
inline Backend parse_backend(const std::string& s, const std::string& who) {
  if (s == "kokkos") {
    return Backend::kokkos;
  }
  if (s == "cuda") {
    return Backend::cuda;
  }
  throw InputError(who + ": unknown kernel backend '" + s + "'; use kokkos or cuda");
}

namespace impl {

/// Whether this build can run Backend::cuda for kernels on ExecSpace in precision T.
template <class ExecSpace, class T>
inline constexpr bool kCudaBackend =
#if defined(FASTMLIP_HAVE_CUDA) && defined(KOKKOS_ENABLE_CUDA)
    std::is_same_v<ExecSpace, Kokkos::Cuda> && (std::is_same_v<T, float> || std::is_same_v<T, double>);
#else
    false;
#endif

/// The refusal of Backend::cuda where kCudaBackend is false, saying what is missing.
inline UnsupportedError no_cuda_backend(const char* who, const char* exec_space) {
#if defined(FASTMLIP_HAVE_CUDA)
  const char* build = "";
#else
  const char* build = " This build has none: configure it with -DFASTMLIP_ENABLE_CUDA=ON.";
#endif
  return UnsupportedError(
      std::string(who) +
      ": the 'cuda' kernel backend runs the hand-written CUDA kernels, in float or double, for a "
      "model on a Kokkos::Cuda execution space; this one runs on " +
      exec_space + "." + build + " Use the 'kokkos' backend.");
}

/// Kokkos views handed to the CUDA kernels as raw pointers must be dense row-major arrays.
template <class View>
bool dense(const View& v) {
  return v.span_is_contiguous() && v.span() == v.size();
}

}  // namespace impl
}  // namespace fastmlip::kernels
