// SPDX-License-Identifier: MIT
#pragma once
// Launch geometry of the hand-written CUDA kernels, in one place.
namespace fastmlip::cuda::launch {

// Threads per block of the per-edge kernels: 4 warps keeps enough blocks per SM for latency
// hiding while the shared-memory staging (threads x N values) stays under 32 KiB in double.
inline constexpr int kEdgeThreads = 128;

inline unsigned blocks_for(long long items, int threads) {
  return static_cast<unsigned>((items + threads - 1) / threads);
}

}  // namespace fastmlip::cuda::launch
