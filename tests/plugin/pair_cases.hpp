// SPDX-License-Identifier: MIT
#pragma once
// The YAML cases of the pair styles (tests/plugin/mace/*.yaml, tests/plugin/chgnet/*.yaml) in
// the spirit of LAMMPS' unittest/force-styles: each file names a potential (relative to the repository), the
// pair_style line, the element of each atom type and the commands that create the system, and
// holds reference energies, virial stresses and forces by atom id at `run 0` (init_*) and after
// `run N` under fix nve (run_*). Shared by the host-style and /kk-style tests.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "lammps_harness.hpp"

namespace fastmlip_test {

namespace fs = std::filesystem;

struct Snapshot {
  double energy = 0;
  std::vector<double> stress;  // virial pressure xx yy zz xy xz yz (bar)
  std::vector<double> forces;  // by atom id: 3 per atom, ids 1..N
  double pe_atom_sum = 0;
  std::vector<double> stress_atom_sum;  // sum of compute stress/atom NULL virial (bar A^3)
  double volume = 0;
};

struct Case {
  std::string name;
  std::string potential;   // absolute path (the YAML names it relative to the repository)
  std::string pair_style;  // "fastmlip/mace" plus keywords
  std::string elements;    // "Cu Ni"
  std::string input;       // commands creating box and atoms
  int run_steps = 4;
  double tolerance = 1e-10;  // relative; float32 cases need more
  bool minimize_npt = true;  // whether MinimizeThenNpt runs it (false for the costly models)
  YAML::Node yaml;
};

inline Case load_case(const fs::path& path) {
  Case c;
  c.yaml = YAML::LoadFile(path.string());
  c.name = path.stem().string();
  c.potential = std::string(FASTMLIP_SOURCE_DIR) + "/" + c.yaml["potential"].as<std::string>();
  c.pair_style = with_device(c.yaml["pair_style"].as<std::string>());
  c.elements = c.yaml["elements"].as<std::string>();
  c.input = c.yaml["input"].as<std::string>();
  c.run_steps = c.yaml["run_steps"] ? c.yaml["run_steps"].as<int>() : 4;
  c.tolerance = c.yaml["tolerance"] ? c.yaml["tolerance"].as<double>() : 1e-10;
  c.minimize_npt = c.yaml["minimize_npt"] ? c.yaml["minimize_npt"].as<bool>() : true;
  return c;
}

/// The pair style and the computes every check reads.
inline void potential(Lammps& lmp, const Case& c) {
  lmp.command("pair_style " + c.pair_style);
  lmp.command("pair_coeff * * " + c.potential + " " + c.elements);
  lmp.commands(
      "compute pe_atom all pe/atom\n"
      "compute pe_sum all reduce sum c_pe_atom\n"
      "compute s_atom all stress/atom NULL virial\n"
      "compute s_sum all reduce sum c_s_atom[1] c_s_atom[2] c_s_atom[3] c_s_atom[4] c_s_atom[5] c_s_atom[6]\n"
      "compute p_vir all pressure NULL virial\n"
      "thermo_style custom step pe c_pe_sum c_p_vir[1] c_p_vir[2] c_p_vir[3] c_p_vir[4] c_p_vir[5] c_p_vir[6] "
      "c_s_sum[1] c_s_sum[2] c_s_sum[3] c_s_sum[4] c_s_sum[5] c_s_sum[6] vol\n"
      "thermo_modify norm no\n");
}

/// Creates a case's box and atoms after `header` (units, atom style, atom_modify).
///
/// On several ranks, create_atoms numbers atoms by rank (each rank numbers the lattice points
/// in its own subdomain), so the same input gives other atom ids than on one rank and the
/// references, stored by id, would not apply. There, rank 0 builds the system alone and writes
/// a data file, which every rank then reads: ids, types and positions are the serial ones.
inline void create_system(Lammps& lmp, const Case& c, const std::string& header) {
  if (nprocs() == 1) {
    lmp.commands(header);
    lmp.commands(c.input);
    return;
  }
  const std::string data = scratch(c.name + ".system.data");
  if (rank() == 0) {
    Lammps serial({}, MPI_COMM_SELF);
    serial.commands("units metal\natom_style atomic\natom_modify map array\n");
    serial.commands(c.input);
    serial.command("write_data " + data + " nocoeff");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  lmp.commands(header);
  // write_data keeps the box, ids, types, masses and positions, but not the boundary.
  std::istringstream in(c.input);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("boundary", 0) == 0) {
      lmp.command(line);
    }
  }
  lmp.command("read_data " + data);
}

/// Sets up a case's system and potential (everything before the first run).
inline void setup(Lammps& lmp, const Case& c) {
  create_system(lmp, c, "units metal\natom_style atomic\natom_modify map array\n");
  potential(lmp, c);
}

inline Snapshot snapshot(Lammps& lmp) {
  Snapshot s;
  s.energy = lmp.thermo("pe");
  s.volume = lmp.thermo("vol");
  s.stress = lmp.compute_vector("p_vir", 6);
  s.stress_atom_sum = lmp.compute_vector("s_sum", 6);
  s.pe_atom_sum = lmp.compute_scalar("pe_sum");
  s.forces = lmp.gather("f", 3);
  return s;
}

/// The cases of one model kind: tests/plugin/<model>/*.yaml, sorted.
inline std::vector<fs::path> case_files(const std::string& model = "mace") {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(FASTMLIP_PAIR_CASES_DIR) / model)) {
    if (e.path().extension() == ".yaml") {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Reference comparisons are relative to the largest value of each kind (energy, stress, force),
// at the case's tolerance: the references are this code's own output, so only summation order
// differs (across ranks, between a restart and a fresh start).
inline void expect_close(double got, double want, double scale, double tol, const std::string& what) {
  EXPECT_NEAR(got, want, tol * std::max(1.0, scale)) << what;
}

inline void expect_snapshot(const Snapshot& s, const YAML::Node& ref, const std::string& prefix, double tol,
                     const std::string& where) {
  const double e = ref[prefix + "_energy"].as<double>();
  expect_close(s.energy, e, std::abs(e), tol, where + ": energy");
  const auto stress = ref[prefix + "_stress"].as<std::vector<double>>();
  double sscale = 0;
  for (double v : stress) {
    sscale = std::max(sscale, std::abs(v));
  }
  for (int k = 0; k < 6; ++k) {
    expect_close(s.stress[k], stress[k], sscale, tol, where + ": stress component " + std::to_string(k));
  }
  const auto forces = ref[prefix + "_forces"];
  ASSERT_EQ(forces.size() * 3, s.forces.size()) << where;
  double fscale = 0;
  for (std::size_t a = 0; a < forces.size(); ++a) {
    for (int k = 0; k < 3; ++k) {
      fscale = std::max(fscale, std::abs(forces[a][k + 1].as<double>()));
    }
  }
  for (std::size_t a = 0; a < forces.size(); ++a) {
    const int id = forces[a][0].as<int>();
    for (int k = 0; k < 3; ++k) {
      expect_close(s.forces[3 * (id - 1) + k], forces[a][k + 1].as<double>(), fscale, tol,
                   where + ": force on atom " + std::to_string(id) + " component " + std::to_string(k));
    }
  }
}

inline void store_snapshot(YAML::Node& node, const Snapshot& s, const std::string& prefix) {
  node[prefix + "_energy"] = s.energy;
  node[prefix + "_stress"] = s.stress;
  YAML::Node forces;
  for (std::size_t a = 0; a < s.forces.size() / 3; ++a) {
    YAML::Node row;
    row.SetStyle(YAML::EmitterStyle::Flow);
    row.push_back(static_cast<int>(a + 1));
    for (int k = 0; k < 3; ++k) {
      row.push_back(s.forces[3 * a + k]);
    }
    forces.push_back(row);
  }
  node[prefix + "_forces"] = forces;
}

}  // namespace fastmlip_test
