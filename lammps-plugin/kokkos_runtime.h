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

namespace fastmlip::plugin {

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
