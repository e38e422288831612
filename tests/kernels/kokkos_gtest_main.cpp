// SPDX-License-Identifier: MIT
// GoogleTest main that brackets the tests with Kokkos initialize/finalize. Finalizing runs at
// exit, registered right after initializing: exit handlers and static destructors run in the
// reverse order of registration, so Views that outlive main() in static or thread-local objects
// made later are released before Kokkos is finalized, not after (seen with the trainer's model
// tests: after a backward that throws, LibTorch released the graph, and with it the kernels'
// Views, only at exit; Kokkos 3.4 aborts on a deallocation after finalize).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cstdlib>

int main(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  std::atexit([] { Kokkos::finalize(); });
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
