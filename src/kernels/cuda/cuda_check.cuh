// SPDX-License-Identifier: MIT
#pragma once
// The one checking macro every CUDA runtime call and kernel launch goes through. A failed
// call becomes a fastmlip::Error naming the call, the source location and CUDA's message;
// nothing is printed and nothing aborts, so callers (the plugin, the trainer) decide.
#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"

namespace fastmlip::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  throw Error(std::string(file) + ":" + std::to_string(line) + ": CUDA call '" + expr + "' failed: " +
              cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace fastmlip::cuda

#define FASTMLIP_CUDA_CHECK(expr)                                                  \
  do {                                                                             \
    const cudaError_t fastmlip_cuda_err_ = (expr);                                 \
    if (fastmlip_cuda_err_ != cudaSuccess) {                                       \
      ::fastmlip::cuda::throw_cuda_error(fastmlip_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                              \
  } while (0)

// After a kernel launch: catches bad launch configurations at once (asynchronous faults
// surface at the next synchronising call, which is checked too).
#define FASTMLIP_CUDA_CHECK_LAUNCH() FASTMLIP_CUDA_CHECK(cudaGetLastError())
