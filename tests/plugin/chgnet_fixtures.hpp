// SPDX-License-Identifier: MIT
#pragma once
// The chgnet parity fixtures (tests/reference/data/chgnet, made by
// tests/reference/make_chgnet_fixtures.py) as LAMMPS systems, and the check of one fixture
// through LAMMPS against chgnet's energies, forces, stresses, site energies and magnetic
// moments. Shared by the host-style tests (test_pair_chgnet.cpp) and the /kk tests.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "lammps_harness.hpp"

namespace fastmlip_test {

using nlohmann::json;
namespace fs = std::filesystem;

inline const std::string kData = std::string(FASTMLIP_SOURCE_DIR) + "/tests/reference/data/chgnet";
inline const std::string kPotential = std::string(FASTMLIP_SOURCE_DIR) + "/potentials/chgnet-0.3.0.safetensors";

inline const char* symbol_of(int z) {
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

inline LammpsStructure lammps_structure(const json& j) {
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
/// times `force_scale` / `stress_scale` (the size of the per-edge terms forces and stress sum,
/// whose float32 rounding does not cancel, as in tests/models/test_chgnet_model.cpp). `args`:
/// extra LAMMPS arguments (the KOKKOS tests pass `-k on t 1 -sf kk`), under which `style`
/// must be the pair style in use.
inline void check_fixture(const std::string& name, const std::string& dtype, double tol, double force_scale,
                          double stress_scale, const std::vector<std::string>& args = {},
                          const std::string& style = "fastmlip/chgnet") {
  const json j = read_json(kData + "/" + name + ".json");
  const json& ref = j.at(dtype);
  const auto st = lammps_structure(j);
  Lammps lmp(args);
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
  lmp.command("pair_style " + with_device("fastmlip/chgnet precision " + dtype));
  lmp.command("pair_coeff * * " + kPotential + " " + st.elements);
  EXPECT_EQ(lmp.pair_style(), style) << name;
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

inline std::vector<std::string> fixtures_030() {
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

}  // namespace fastmlip_test
