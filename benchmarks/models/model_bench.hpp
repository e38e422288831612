// SPDX-License-Identifier: MIT
#pragma once
// What the whole-model benchmarks (bench_mace_model.cpp, bench_chgnet_model.cpp) share: the
// GPU's used memory, for memory per atom, and a Google Benchmark main inside Kokkos.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <cstddef>
#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace fastmlip::bench {

/// Bytes in use on the current GPU (every process's), 0 without one: the difference across a
/// case is what the case allocated there.
inline std::size_t device_used_bytes() {
#if defined(KOKKOS_ENABLE_CUDA)
  std::size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  return total_b - free_b;
#else
  return 0;
#endif
}

/// Runs the registered benchmarks with Kokkos initialised around them (and the models' views
/// gone before Kokkos::finalize); 1 for an argument neither understands.
inline int run_benchmarks(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  int rc = 0;
  {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
      rc = 1;
    } else {
      benchmark::RunSpecifiedBenchmarks();
      benchmark::Shutdown();
    }
  }
  Kokkos::finalize();
  return rc;
}

}  // namespace fastmlip::bench
