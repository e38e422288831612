// SPDX-License-Identifier: MIT
#pragma once
/// \file FASTMLIP_HOST_DEVICE marks small math helpers that both the Kokkos functors and the
/// hand-written CUDA kernels call, so each formula is written once. (Kokkos' own
/// KOKKOS_INLINE_FUNCTION is unavailable in .cu files that do not include Kokkos.)
#if defined(__CUDACC__) || defined(__HIPCC__)
#define FASTMLIP_HOST_DEVICE __host__ __device__
#else
#define FASTMLIP_HOST_DEVICE
#endif
