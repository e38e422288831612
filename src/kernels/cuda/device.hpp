// SPDX-License-Identifier: MIT
#pragma once
/// \file CUDA device discovery, callable from plain C++ (no CUDA headers needed).
#include <string>

namespace fastmlip::cuda {

/// Number of usable CUDA devices; 0 when there is no GPU or no driver. Never throws for those
/// two cases, so tests can GTEST_SKIP and CPU-only machines run everything else.
int device_count() noexcept;

/// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)" for device `index`; throws
/// fastmlip::Error if the device cannot be queried.
std::string device_summary(int index = 0);

}  // namespace fastmlip::cuda
