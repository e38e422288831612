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
///    FASTMLIP_ENABLE_CUDA, and float or double; asked for elsewhere it is an UnsupportedError,
///    never a silent fallback.
///  - Backend::automatic ("auto", MaceOptions' default): cuda where it can run, kokkos
///    elsewhere. Also kokkos where a descriptor exceeds the CUDA kernels' limits. The CUDA
///    kernels became the GPU default after an H100 run (2026-11-26, benchmarks/README.md). It
///    compared them with the Kokkos path inside the model: 1.1e-14 in float64, 2.5e-6 in
///    float32. The whole model then ran 1.1x to 2.2x faster than mace-torch, where the Kokkos
///    path ran 4x to 18x slower.
#include <Kokkos_Core.hpp>
#include <string>
#include <type_traits>

#include "core/error.hpp"

namespace fastmlip::kernels {

enum class Backend { kokkos, cuda, automatic };

inline const char* backend_name(Backend b) {
  return b == Backend::cuda ? "cuda" : b == Backend::automatic ? "auto" : "kokkos";
}

/// "kokkos", "cuda" or "auto"; InputError naming `who` and the choices otherwise.
inline Backend parse_backend(const std::string& s, const std::string& who) {
  if (s == "kokkos") {
    return Backend::kokkos;
  }
  if (s == "cuda") {
    return Backend::cuda;
  }
  if (s == "auto") {
    return Backend::automatic;
  }
  throw InputError(who + ": unknown kernel backend '" + s + "'; use auto, kokkos or cuda");
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

/// What `requested` means for kernels on ExecSpace in precision T: automatic is cuda where this
/// build can run it there, kokkos elsewhere; kokkos and cuda are themselves.
template <class ExecSpace, class T>
constexpr Backend resolve(Backend requested) {
  if (requested != Backend::automatic) {
    return requested;
  }
  return kCudaBackend<ExecSpace, T> ? Backend::cuda : Backend::kokkos;
}

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
