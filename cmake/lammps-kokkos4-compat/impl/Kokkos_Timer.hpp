// SPDX-License-Identifier: MIT
#pragma once
// LAMMPS releases from before Kokkos 4 (Debian's 29 Sep 2021 among them) include Kokkos' timer
// as impl/Kokkos_Timer.hpp; Kokkos 4 has it only as the public Kokkos_Timer.hpp. Used only by
// the compile check of the /kk styles for CUDA (lammps-plugin/CMakeLists.txt).
#include <Kokkos_Timer.hpp>
