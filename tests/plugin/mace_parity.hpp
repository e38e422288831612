// SPDX-License-Identifier: MIT
#pragma once
// Parity of pair_style fastmlip/mace with precomputed results, through LAMMPS: a model directory
// in the layout of tests/reference/data/mace (index.json entries naming a potential, its species
// and a results file with structures and, per structure and head, energy, per-atom energies,
// forces and virial). Shared by the mace-torch fixtures (test_pair_mace_parity.cpp) and the
// trainer's exported model (test_pair_trainer_parity.cpp).
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/json_fixtures.hpp"
#include "lammps_harness.hpp"

namespace fastmlip_test {

inline const char* symbol_of(int z) {
  switch (z) {
    case 13: return "Al";
    case 28: return "Ni";
    case 29: return "Cu";
    default: return nullptr;
  }
}

/// LAMMPS commands creating a fixture structure: one atom type per model species (in the
/// model's order), atom i of the fixture is atom id i+1.
inline std::string structure_input(const nlohmann::json& st, const std::vector<int>& species) {
  const auto cell = st.at("cell").get<std::vector<std::vector<double>>>();
  const auto pbc = st.at("pbc").get<std::vector<bool>>();
  const auto pos = st.at("positions").get<std::vector<std::vector<double>>>();
  const auto z = st.at("atomic_numbers").get<std::vector<int>>();
  std::string in;
  const bool periodic = pbc[0] && pbc[1] && pbc[2];
  if (periodic) {
    // LAMMPS' restricted triclinic cell: a along x, b in the xy plane. The fixtures are
    // written in that orientation, so no rotation is needed (checked here).
    if (cell[0][1] != 0 || cell[0][2] != 0 || cell[1][2] != 0) {
      throw std::runtime_error("fixture cell is not lower-triangular; rotate it to LAMMPS' convention first");
    }
    in += "region box prism 0 " + num(cell[0][0]) + " 0 " + num(cell[1][1]) + " 0 " + num(cell[2][2]) + " " +
          num(cell[1][0]) + " " + num(cell[2][0]) + " " + num(cell[2][1]) + " units box\n";
  } else {
    if (pbc[0] || pbc[1] || pbc[2]) {
      throw std::runtime_error("mixed periodicity is not among the fixtures");
    }
    double lo[3] = {1e300, 1e300, 1e300}, hi[3] = {-1e300, -1e300, -1e300};
    for (const auto& p : pos) {
      for (int k = 0; k < 3; ++k) {
        lo[k] = std::min(lo[k], p[k]);
        hi[k] = std::max(hi[k], p[k]);
      }
    }
    in += "boundary f f f\n";
    in += "region box block " + num(lo[0] - 10) + " " + num(hi[0] + 10) + " " + num(lo[1] - 10) + " " +
          num(hi[1] + 10) + " " + num(lo[2] - 10) + " " + num(hi[2] + 10) + " units box\n";
  }
  in += "create_box " + std::to_string(species.size()) + " box\n";
  in += "mass * 50.0\n";
  for (std::size_t i = 0; i < pos.size(); ++i) {
    const auto it = std::find(species.begin(), species.end(), z[i]);
    if (it == species.end()) {
      throw std::runtime_error("fixture atom of Z " + std::to_string(z[i]) + " not in the model");
    }
    const int type = static_cast<int>(it - species.begin()) + 1;
    in += "create_atoms " + std::to_string(type) + " single " + num(pos[i][0]) + " " + num(pos[i][1]) + " " +
          num(pos[i][2]) + " units box remap yes\n";
  }
  return in;
}

struct Tolerance {
  double rel;
  const char* precision;
};

/// Runs every result of the model `entry` of the directory `dir` in LAMMPS and compares.
inline void check_model(const std::string& dir, const nlohmann::json& entry, const Tolerance& tol) {
  using nlohmann::json;
  const std::string name = entry.at("name");
  const json fixture = read_json(dir + "/" + entry.at("results").get<std::string>());
  const auto species = entry.at("species").get<std::vector<int>>();
  std::string elements;
  for (int z : species) {
    elements += std::string(" ") + symbol_of(z);
  }
  for (const auto& result : fixture.at("results")) {
    const std::string sname = result.at("structure");
    const std::string head = result.at("head");
    const json& st = fixture.at("structures").at(sname);
    const std::string where = name + " / " + sname + " / head " + head + " / " + tol.precision;
    SCOPED_TRACE(where);
    Lammps lmp;
    lmp.commands("units metal\natom_style atomic\natom_modify map array\n");
    lmp.commands(structure_input(st, species));
    lmp.command("pair_style " + with_device("fastmlip/mace precision " + std::string(tol.precision) +
                                            " head " + head + fastmlip::test::mace_graph_keywords(fixture)));
    lmp.command("pair_coeff * * " + dir + "/" + entry.at("potential").get<std::string>() + elements);
    lmp.commands("compute pe_atom all pe/atom\ncompute p_vir all pressure NULL virial\n"
                 "compute pe_sum all reduce sum c_pe_atom\n"
                 "thermo_style custom step pe c_pe_sum vol c_p_vir[1] c_p_vir[2] c_p_vir[3] c_p_vir[4] c_p_vir[5] "
                 "c_p_vir[6]\nthermo_modify norm no\nrun 0 post no\n");

    const double energy = result.at("energy");
    EXPECT_NEAR(lmp.thermo("pe"), energy, tol.rel * std::max(1.0, std::abs(energy))) << "energy";

    const auto node_energy = result.at("node_energy").get<std::vector<double>>();
    const auto pe_atom = lmp.gather_compute("pe_atom");
    ASSERT_EQ(pe_atom.size(), node_energy.size());
    double escale = 1.0;
    for (double e : node_energy) {
      escale = std::max(escale, std::abs(e));
    }
    for (std::size_t i = 0; i < node_energy.size(); ++i) {
      EXPECT_NEAR(pe_atom[i], node_energy[i], tol.rel * escale) << "energy of atom " << i + 1;
    }

    const auto forces = result.at("forces").get<std::vector<std::vector<double>>>();
    const auto f = lmp.gather("f", 3);
    ASSERT_EQ(f.size(), 3 * forces.size());
    double fscale = 1.0;
    for (const auto& row : forces) {
      for (double v : row) {
        fscale = std::max(fscale, std::abs(v));
      }
    }
    for (std::size_t i = 0; i < forces.size(); ++i) {
      for (int k = 0; k < 3; ++k) {
        EXPECT_NEAR(f[3 * i + k], forces[i][k], tol.rel * fscale) << "force on atom " << i + 1 << " component " << k;
      }
    }

    // mace-torch's virial -dE/d(strain) is LAMMPS' virial W = p V / nktv2p (p in bar). For the
    // non-periodic cluster both are sum_i r_i f_i of the same atoms, so they compare too.
    const auto virial = result.at("virial").get<std::vector<std::vector<double>>>();
    const double volume = lmp.thermo("vol");
    const int voigt[6][2] = {{0, 0}, {1, 1}, {2, 2}, {0, 1}, {0, 2}, {1, 2}};
    double wscale = 1.0;
    for (const auto& row : virial) {
      for (double v : row) {
        wscale = std::max(wscale, std::abs(v));
      }
    }
    const auto p = lmp.compute_vector("p_vir", 6);
    for (int k = 0; k < 6; ++k) {
      const double w = p[k] * volume / kNktv2pMetal;
      EXPECT_NEAR(w, virial[voigt[k][0]][voigt[k][1]], tol.rel * wscale) << "virial component " << k;
    }
  }
}

/// The entries of `dir`/index.json marked committed.
inline std::vector<nlohmann::json> committed_models(const std::string& dir) {
  std::vector<nlohmann::json> out;
  const nlohmann::json index = read_json(dir + "/index.json");
  for (const auto& m : index.at("models")) {
    if (m.value("committed", false)) {
      out.push_back(m);
    }
  }
  return out;
}

}  // namespace fastmlip_test
