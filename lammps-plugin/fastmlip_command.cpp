// SPDX-License-Identifier: MIT
#include "fastmlip_command.h"

#include <string>

#include "comm.h"
#include "core/version.hpp"
#include "error.h"
#include "lammps.h"
#include "utils.h"

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
  const char* kokkos_build = "no (host styles only: no /kk styles)";
#endif
#if defined(OPEN_MPI)
  const char* mpi_build = "Open MPI";
#elif defined(MPICH_VERSION)
  const char* mpi_build = "MPICH " MPICH_VERSION;
#else
  const char* mpi_build = "unknown";
#endif
  utils::logmesg(lmp,
                 "fastmlip {}\n"
                 "  built against LAMMPS: {} (LAMMPS_VERSION_NUMBER {})\n"
                 "  running in LAMMPS:    {}\n"
                 "  KOKKOS support built: {}; KOKKOS active in this run: {}\n"
                 "  MPI ranks: {}; built with MPI: {}\n",
                 fastmlip::kVersion, FASTMLIP_LAMMPS_VERSION, LAMMPS_VERSION_NUMBER, lmp->version, kokkos_build,
                 lmp->kokkos != nullptr ? "yes" : "no", comm->nprocs, mpi_build);
}
