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

#include "lammps_harness.hpp"

namespace {

using namespace fastmlip_test;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string kData = std::string(FASTMLIP_SOURCE_DIR) + "/tests/reference/data/chgnet";
const std::string kPotential = std::string(FASTMLIP_SOURCE_DIR) + "/potentials/chgnet-0.3.0.safetensors";

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return json::parse(in);
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

const char* symbol_of(int z) {
  switch (z) {
    case 3: return "Li";
    case 8: return "O";
    case 25: return "Mn";
    case 26: return "Fe";
    case 27: return "Co";
    case 28: return "Ni";
    default: return nullptr;
  }
}

/// A fixture as LAMMPS input. The cell's rows a, b, c are rotated to a along x, b in the xy
/// plane (LAMMPS' restricted triclinic form); Q (rows: the new axes) rotates positions,
/// forces and the stress tensor the same way.
struct LammpsStructure {
  std::string input;     // creates box and atoms; atom i of the fixture is id i + 1
  std::string elements;  // pair_coeff symbols, one per type
  std::array<double, 9> q{};
  std::vector<int> types;
};

LammpsStructure lammps_structure(const json& j) {
  std::array<std::array<double, 3>, 3> L;
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b) L[a][b] = j.at("lattice")[a][b].get<double>();
  auto dot = [](const std::array<double, 3>& u, const std::array<double, 3>& v) {
    return u[0] * v[0] + u[1] * v[1] + u[2] * v[2];
  };
  std::array<double, 3> e1 = L[0], e2 = L[1], e3;
  const double n1 = std::sqrt(dot(e1, e1));
  for (auto& v : e1) v /= n1;
  const double p = dot(e2, e1);
  for (int k = 0; k < 3; ++k) e2[k] -= p * e1[k];
  const double n2 = std::sqrt(dot(e2, e2));
  for (auto& v : e2) v /= n2;
  e3 = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]};
  LammpsStructure s;
  s.q = {e1[0], e1[1], e1[2], e2[0], e2[1], e2[2], e3[0], e3[1], e3[2]};
  auto rot = [&](const std::array<double, 3>& v) {
    return std::array<double, 3>{dot(e1, v), dot(e2, v), dot(e3, v)};
  };
  const auto a = rot(L[0]), b = rot(L[1]), c = rot(L[2]);
  if (!(c[2] > 0)) throw std::runtime_error("left-handed fixture cell");
  // Tilts beyond half a box length need LAMMPS' permission (the sheared fixtures have some).
  s.input = "box tilt large\nregion box prism 0 " + num(a[0]) + " 0 " + num(b[1]) + " 0 " + num(c[2]) + " " + num(b[0]) +
            " " + num(c[0]) + " " + num(c[1]) + " units box\n";
  std::vector<int> zs;
  for (const auto& z : j.at("numbers")) {
    const int v = z.get<int>();
    if (std::find(zs.begin(), zs.end(), v) == zs.end()) zs.push_back(v);
  }
  s.input += "create_box " + std::to_string(zs.size()) + " box\n";
  for (std::size_t t = 0; t < zs.size(); ++t) {
    if (!symbol_of(zs[t])) throw std::runtime_error("add Z " + std::to_string(zs[t]) + " to symbol_of");
    s.elements += std::string(t ? " " : "") + symbol_of(zs[t]);
    s.input += "mass " + std::to_string(t + 1) + " 10.0\n";
  }
  const auto& pos = j.at("positions");
  for (std::size_t i = 0; i < pos.size(); ++i) {
    const auto r = rot({pos[i][0].get<double>(), pos[i][1].get<double>(), pos[i][2].get<double>()});
    const int t = static_cast<int>(std::find(zs.begin(), zs.end(), j.at("numbers")[i].get<int>()) - zs.begin()) + 1;
    s.types.push_back(t);
    s.input += "create_atoms " + std::to_string(t) + " single " + num(r[0]) + " " + num(r[1]) + " " + num(r[2]) +
               " units box remap yes\n";
  }
  return s;
}

/// Runs `run 0` on a fixture and compares with chgnet's `dtype` results. Tolerances: `tol`
/// relative to the largest value of each kind; forces and the stress relative to `terms`
/// (float32 rounding of sums that cancel, as in tests/models/test_chgnet_model.cpp).
void check_fixture(const std::string& name, const std::string& dtype, double tol, double force_scale,
                   double stress_scale) {
  const json j = read_json(kData + "/" + name + ".json");
  const json& ref = j.at(dtype);
  const auto st = lammps_structure(j);
  Lammps lmp;
  if (nprocs() == 1) {
    lmp.commands("units metal\natom_style atomic\natom_modify map array\n" + st.input);
  } else {
    // Same ids on every rank count: rank 0 builds the system and writes it (as pair_cases.hpp).
    const std::string data = scratch("chgnet-" + name + ".data");
    if (rank() == 0) {
      Lammps serial({}, MPI_COMM_SELF);
      serial.commands("units metal\natom_style atomic\natom_modify map array\n" + st.input);
      serial.command("write_data " + data + " nocoeff");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    lmp.commands("units metal\natom_style atomic\natom_modify map array\nbox tilt large\n");
    lmp.command("read_data " + data);
  }
  lmp.command("pair_style fastmlip/chgnet precision " + dtype);
  lmp.command("pair_coeff * * " + kPotential + " " + st.elements);
  lmp.commands(
      "compute pe_atom all pe/atom\ncompute mag all fastmlip/magmom\ncompute p_vir all pressure NULL virial\n"
      "thermo_style custom step pe c_p_vir[1] c_p_vir[2] c_p_vir[3] c_p_vir[4] c_p_vir[5] c_p_vir[6] vol\n"
      "thermo_modify norm no\nrun 0 post no\n");
  const int n = static_cast<int>(j.at("numbers").size());
  const double e = lmp.thermo("pe");
  EXPECT_NEAR(e / n, ref.at("energy_per_atom").get<double>(), tol * 10) << name << " " << dtype << ": energy per atom";
  const auto f = lmp.gather("f", 3);
  const auto pe = lmp.gather_compute("pe_atom");
  const auto mag = lmp.gather_compute("mag");
  const auto& q = st.q;
  for (int i = 0; i < n; ++i) {
    const auto& fr = ref.at("forces")[i];
    for (int a = 0; a < 3; ++a) {
      double want = 0;
      for (int b = 0; b < 3; ++b) want += q[3 * a + b] * fr[b].get<double>();
      EXPECT_NEAR(f[3 * i + a], want, tol * force_scale) << name << " " << dtype << ": force on atom " << i + 1;
    }
    EXPECT_NEAR(pe[i], ref.at("site_energies")[i].get<double>(), tol * 10) << name << " " << dtype << ": site energy";
    EXPECT_NEAR(mag[i], ref.at("magmoms")[i].get<double>(), tol * 4) << name << " " << dtype << ": magmom";
  }
  // LAMMPS' pressure (bar) is minus chgnet's stress (GPa) x 1e4, in the rotated frame.
  const auto p = lmp.compute_vector("p_vir", 6);
  const int comp[6][2] = {{0, 0}, {1, 1}, {2, 2}, {0, 1}, {0, 2}, {1, 2}};
  for (int k = 0; k < 6; ++k) {
    double want = 0;
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) {
        want += q[3 * comp[k][0] + a] * ref.at("stress")[a][b].get<double>() * q[3 * comp[k][1] + b];
      }
    EXPECT_NEAR(-p[k] / 1e4, want, tol * stress_scale) << name << " " << dtype << ": stress component " << k;
  }
}

std::vector<std::string> fixtures_030() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kData)) {
    const auto stem = e.path().stem().string();
    if (e.path().extension() != ".json" || stem.find("_debug") != std::string::npos) continue;
    // The shipped potential is the 0.3.0 checkpoint; the others are checked in the core's test.
    if (read_json(e.path().string()).at("model").get<std::string>() != "chgnet 0.3.0") continue;
    names.push_back(stem);
  }
  std::sort(names.begin(), names.end());
  return names;
}

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
