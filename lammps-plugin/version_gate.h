// SPDX-License-Identifier: MIT
#pragma once
// The plugin's load-time checks that the running LAMMPS is the one it was built for.
//
// The styles compile against LAMMPS' internal headers, so the class layouts they assume (Pair,
// Atom, NeighList...) are those of one version, and their MPI calls use one MPI library's ABI.
// Loaded into another LAMMPS they fail to load (an undefined symbol), read the wrong fields, or
// pass MPI handles the running MPI does not know (an `Invalid MPI_Op` abort mid-run). The loader
// (plugin.cpp) runs these checks with LAMMPS' C library API only, before it opens the styles.
// Kept free of LAMMPS and MPI headers so it can be unit-tested.
#include <string>

namespace fastmlip::plugin {

/// MPI implementations by binary interface: every MPICH derivative (Intel MPI, MVAPICH, Cray
/// MPICH) shares MPICH's ABI (libmpi.so.12); Open MPI has its own (libmpi.so.40).
enum class MpiFamily { unknown, mpich, open_mpi };

/// "29 Sep 2021" for 20210929, as LAMMPS prints its version.
std::string lammps_date(int yyyymmdd);

/// "" when `running` (lammps_version(), yyyymmdd) equals `compiled` (the LAMMPS the plugin was
/// built against); otherwise the error message, saying what to rebuild against.
std::string check_lammps_version(int compiled, int running);

/// The family of the MPI library whose MPI_Get_library_version() text is `library_version`.
MpiFamily mpi_family_of(const std::string& library_version);

/// "MPICH", "Open MPI" or "an unknown MPI".
std::string mpi_family_name(MpiFamily family);

/// "" when the running MPI (its MPI_Get_library_version() text) has the ABI of `compiled`, or
/// when either side is unknown (nothing to compare); otherwise the error message.
std::string check_mpi_family(MpiFamily compiled, const std::string& running_library_version);

}  // namespace fastmlip::plugin
