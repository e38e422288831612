// SPDX-License-Identifier: MIT
#include <cstdio>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/device.hpp"

namespace fastmlip::cuda {

int device_count() noexcept {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    // cudaErrorNoDevice / cudaErrorInsufficientDriver on CPU-only machines: not an error for
    // us, just no GPU. Clear the sticky error state so later calls start clean.
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string device_summary(int index) {
  cudaDeviceProp prop{};
  FASTMLIP_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %d SMs, %.1f GiB)", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace fastmlip::cuda
