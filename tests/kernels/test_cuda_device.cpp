// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include "kernels/cuda/device.hpp"

namespace fastmlip::cuda {
namespace {

TEST(CudaDevice, CountIsNeverNegative) { EXPECT_GE(device_count(), 0); }

TEST(CudaDevice, SummaryNamesTheDevice) {
  if (device_count() == 0) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  const std::string s = device_summary(0);
  EXPECT_NE(s.find("sm_"), std::string::npos) << s;
}

}  // namespace
}  // namespace fastmlip::cuda
