// SPDX-License-Identifier: MIT
#include "fastmlip_command.h"

#include <string>

#include "comm.h"
#include "core/version.hpp"
#include "error.h"
#include "lammps.h"
#include "utils.h"
#include "version.h"

using namespace LAMMPS_NS;

void FastmlipCommand::command(int narg, char** arg) {
  if (narg != 1 || std::string(arg[0]) != "info") {
    error->all(FLERR, "Illegal fastmlip command: usage is 'fastmlip info'");
  }
  if (comm->me != 0) {
    return;
  }
#ifdef LMP_KOKKOS
  const char* kokkos_build = "yes";
#else
  const char* kokkos_build = "no";
#endif
  utils::logmesg(lmp,
                 "fastmlip {}\n"
                 "  built against LAMMPS: {} (LAMMPS_VERSION_NUMBER {})\n"
                 "  running in LAMMPS:    {}\n"
                 "  KOKKOS support built: {}; KOKKOS active in this run: {}\n"
                 "  MPI ranks: {}\n",
                 fastmlip::kVersion, LAMMPS_VERSION, LAMMPS_VERSION_NUMBER, lmp->version, kokkos_build,
                 lmp->kokkos != nullptr ? "yes" : "no", comm->nprocs);
}
