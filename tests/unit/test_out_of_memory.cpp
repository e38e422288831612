// SPDX-License-Identifier: MIT
// Which exceptions are failed allocations (core/out_of_memory.hpp): what the models and the
// trainer turn into a ResourceError that says what to do.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "core/out_of_memory.hpp"

namespace fastmlip::test {
namespace {

TEST(OutOfMemory, TheAllocatorsReportsAreRecognisedAndNothingElse) {
  EXPECT_TRUE(is_out_of_memory(std::bad_alloc()));
  // Kokkos' device allocation failure, and LibTorch's CUDA caching allocator's.
  EXPECT_TRUE(is_out_of_memory(std::runtime_error("Kokkos failed to allocate memory for label \"x\"")));
  EXPECT_TRUE(is_out_of_memory(std::runtime_error(
      "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.10 GiB total capacity)")));
  EXPECT_TRUE(is_out_of_memory(std::runtime_error(
      "[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
      "allocate 200522752 bytes. Error code 12 (Cannot allocate memory)")));
  EXPECT_FALSE(is_out_of_memory(std::runtime_error("index 7 is out of bounds")));
  EXPECT_FALSE(is_out_of_memory(std::logic_error("bad")));
  // Our own errors are already clear, whatever they say.
  EXPECT_FALSE(is_out_of_memory(InputError("a.xyz: out of memory is not a label")));
  EXPECT_FALSE(is_out_of_memory(ResourceError("out of HostSpace memory evaluating ...")));
}

TEST(OutOfMemory, TheAllocatorsMessageOnOneLine) {
  EXPECT_EQ(allocator_message(
                "Kokkos failed to allocate\n  memory of 8 bytes\n\nTraceback functionality not available\n"),
            "Kokkos failed to allocate memory of 8 bytes");
  EXPECT_EQ(allocator_message("  CUDA out of memory.  "), "CUDA out of memory.");
  EXPECT_EQ(allocator_message(""), "");
}

}  // namespace
}  // namespace fastmlip::test
