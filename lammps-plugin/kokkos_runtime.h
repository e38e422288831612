// SPDX-License-Identifier: MIT
#pragma once
// The fastmlip models allocate Kokkos Views, so Kokkos must be running before a pair style
// loads a potential. Under `lmp -k on` LAMMPS' KOKKOS package has started it; in a plain run
// (no -k, or a LAMMPS without KOKKOS) nobody has, and the plugin starts it once, on the
// default host execution space with its default thread count. LAMMPS' KOKKOS package checks
// Kokkos::is_initialized() before starting it, so a later `-k on` instance in the same
// process reuses it; whoever finalizes first (LAMMPS' main does at exit) wins, and the exit
// hook below only finalizes if nobody did.
#include <Kokkos_Core.hpp>
#include <cstdlib>
#include <string>
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace fastmlip::plugin {

/// Why Kokkos cannot start on this node, or "" if it can. A plugin whose Kokkos has CUDA (the
/// lammps-wheel-cuda preset) starts CUDA even for `device host`, and Kokkos' own start on a node
/// without a usable GPU is an uncaught exception that aborts LAMMPS with a CUDA error code; this
/// asks the CUDA runtime first so that the pair style can say what is wrong and what to do.
inline std::string kokkos_start_problem() {
  if (Kokkos::is_initialized()) {
    return "";
  }
#if defined(KOKKOS_ENABLE_CUDA)
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  std::string what;
  if (err != cudaSuccess) {
    what = std::string("the CUDA runtime finds no usable GPU (") + cudaGetErrorName(err) + ": " +
           cudaGetErrorString(err) + ")";
  } else if (count == 0) {
    what = "the CUDA runtime finds no GPU";
  }
  if (!what.empty()) {
    const std::string built =
        "this plugin was built for NVIDIA GPUs (its Kokkos runs on CUDA: the "
        "lammps-wheel-cuda preset) and starts CUDA even for 'device host', but ";
    const std::string todo =
        "; run on a node with a GPU and its driver, or use a plugin built without CUDA "
        "(the default or lammps-wheel preset, docs/building.md) for CPU-only runs";
    return built + "on this node " + what + todo;
  }
#endif
  return "";
}

/// Starts Kokkos if nobody has; call kokkos_start_problem() first.
inline void ensure_kokkos_running() {
  if (Kokkos::is_initialized()) {
    return;
  }
  Kokkos::initialize();
  std::atexit([] {
    if (Kokkos::is_initialized()) {
      Kokkos::finalize();
    }
  });
}

}  // namespace fastmlip::plugin
