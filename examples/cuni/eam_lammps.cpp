// SPDX-License-Identifier: MIT
#include "eam_lammps.hpp"

#include <library.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "core/error.hpp"

namespace cuni {
namespace {
const char* kSymbols[] = {"", "Cu", "Ni"};  // LAMMPS type -> element

int type_of(const std::string& s) {
  if (s == "Cu") {
    return 1;
  }
  if (s == "Ni") {
    return 2;
  }
  throw fastmlip::InputError("CuNi example: species '" + s + "' is not Cu or Ni");
}

std::string fmt(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace

EamLammps::EamLammps(std::string potential_file) : m_potential(std::move(potential_file)) {
  const char* args[] = {"cuni", "-log", "none", "-screen", "none", "-nocite"};
  m_lmp = lammps_open_no_mpi(6, const_cast<char**>(args), nullptr);
  if (m_lmp == nullptr) {
    throw fastmlip::Error("CuNi example: could not start LAMMPS");
  }
}

EamLammps::~EamLammps() { lammps_close(m_lmp); }

void EamLammps::command(const std::string& cmd) {
  lammps_command(m_lmp, cmd.c_str());
  if (lammps_has_error(m_lmp)) {
    char buf[2048];
    lammps_get_last_error_message(m_lmp, buf, sizeof buf);
    throw fastmlip::Error("CuNi example: LAMMPS command '" + cmd + "' failed: " + buf);
  }
}

// Everything a fresh simulation needs before a box exists. `atom_modify map array` lets
// gather/scatter address atoms by id.
static const char* kPreamble[] = {"clear", "units metal", "atom_style atomic", "atom_modify map array sort 0 0.0",
                                  "boundary p p p"};

fastmlip::io::Frame EamLammps::build(const std::vector<std::string>& commands) {
  for (const char* c : kPreamble) {
    command(c);
  }
  for (const auto& c : commands) {
    command(c);
  }
  return extract_frame();
}

fastmlip::io::Frame EamLammps::extract_frame() {
  const int n = static_cast<int>(lammps_get_natoms(m_lmp));
  double lo[3], hi[3], xy, yz, xz;
  int periodic[3], box_change;
  lammps_extract_box(m_lmp, lo, hi, &xy, &yz, &xz, periodic, &box_change);
  fastmlip::io::Frame f;
  f.cell = std::array<double, 9>{hi[0] - lo[0], 0, 0, xy, hi[1] - lo[1], 0, xz, yz, hi[2] - lo[2]};
  f.pbc = {periodic[0] != 0, periodic[1] != 0, periodic[2] != 0};
  std::vector<double> x(3 * static_cast<std::size_t>(n));
  std::vector<int> type(n);
  if (n > 0) {
    lammps_gather_atoms(m_lmp, const_cast<char*>("x"), 1, 3, x.data());
    lammps_gather_atoms(m_lmp, const_cast<char*>("type"), 0, 1, type.data());
  }
  f.species.resize(n);
  f.positions.resize(3 * static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    f.species[i] = kSymbols[type[i]];
    for (int k = 0; k < 3; ++k) {
      f.positions[3 * i + k] = x[3 * i + k] - lo[k];
    }
  }
  return f;
}

void EamLammps::load_frame(const fastmlip::io::Frame& frame) {
  if (!frame.cell) {
    throw fastmlip::InputError("CuNi example: frame at " + frame.source + ":" + std::to_string(frame.line) +
                               " has no Lattice");
  }
  const auto& c = *frame.cell;
  if (c[1] != 0.0 || c[2] != 0.0 || c[5] != 0.0) {
    throw fastmlip::InputError("CuNi example: frame at " + frame.source + ":" + std::to_string(frame.line) +
                               " has a cell that is not in LAMMPS' lower-triangular form (a along x, b in xy)");
  }
  for (const char* p : kPreamble) {
    command(p);
  }
  command("boundary " + std::string(frame.pbc[0] ? "p " : "f ") + (frame.pbc[1] ? "p " : "f ") +
          (frame.pbc[2] ? "p" : "f"));
  // Always a prism, so that triclinic and orthogonal frames follow one code path.
  command("region cell prism 0 " + fmt(c[0]) + " 0 " + fmt(c[4]) + " 0 " + fmt(c[8]) + " " + fmt(c[3]) + " " +
          fmt(c[6]) + " " + fmt(c[7]) + " units box");
  command("create_box 2 cell");
  command("mass 1 63.546");
  command("mass 2 58.6934");
  const int n = static_cast<int>(frame.natoms());
  std::vector<int> ids(n), types(n);
  for (int i = 0; i < n; ++i) {
    ids[i] = i + 1;
    types[i] = type_of(frame.species[i]);
  }
  // bexpand=0: atoms outside the box are wrapped for periodic dims, dropped otherwise; we
  // check the count so a dropped atom is an error, not a silently smaller structure.
  const int created = lammps_create_atoms(m_lmp, n, ids.data(), types.data(), frame.positions.data(), nullptr, nullptr, 0);
  if (created != n) {
    throw fastmlip::InputError("CuNi example: LAMMPS accepted " + std::to_string(created) + " of " +
                               std::to_string(n) + " atoms of the frame at " + frame.source + ":" +
                               std::to_string(frame.line) + " (atoms outside a non-periodic box?)");
  }
  command("pair_style eam/alloy");
  command("pair_coeff * * " + m_potential + " Cu Ni");
  command("neighbor 1.0 bin");
}

void EamLammps::label(fastmlip::io::Frame& frame) {
  load_frame(frame);
  // Potential part of the pressure only: DFT-style labels are static, with no kinetic term.
  command("compute fastmlip_pv all pressure NULL virial");
  command("thermo_style custom step pe c_fastmlip_pv[1]");
  command("run 0");
  const int n = static_cast<int>(frame.natoms());
  const double energy = lammps_get_thermo(m_lmp, "pe");
  const double* p = static_cast<double*>(lammps_extract_compute(m_lmp, "fastmlip_pv", LMP_STYLE_GLOBAL, LMP_TYPE_VECTOR));
  const double nktv2p = *static_cast<double*>(lammps_extract_global(m_lmp, "nktv2p"));
  if (p == nullptr) {
    throw fastmlip::Error("CuNi example: the pressure compute returned no vector");
  }
  // LAMMPS: p_ab = -(virial_ab) ... in bar, compressive positive, ordered xx yy zz xy xz yz.
  // ASE's stress is the negative of that, in eV/A^3; dividing by LAMMPS' own nktv2p undoes its
  // unit conversion exactly.
  const double sxx = -p[0] / nktv2p, syy = -p[1] / nktv2p, szz = -p[2] / nktv2p;
  const double sxy = -p[3] / nktv2p, sxz = -p[4] / nktv2p, syz = -p[5] / nktv2p;
  std::vector<double> forces(3 * static_cast<std::size_t>(n));
  if (n > 0) {
    lammps_gather_atoms(m_lmp, const_cast<char*>("f"), 1, 3, forces.data());
  }
  frame.set_info("energy", fmt(energy));
  frame.set_info("free_energy", fmt(energy));
  frame.set_info("stress", fmt(sxx) + " " + fmt(sxy) + " " + fmt(sxz) + " " + fmt(sxy) + " " + fmt(syy) + " " +
                               fmt(syz) + " " + fmt(sxz) + " " + fmt(syz) + " " + fmt(szz));
  frame.set_array("forces", 3, std::move(forces));
}

std::vector<fastmlip::io::Frame> EamLammps::sample_md(const fastmlip::io::Frame& frame, double T, int equilibrate,
                                                      int interval, int count, std::uint32_t seed) {
  load_frame(frame);
  command("timestep 0.001");
  command("velocity all create " + fmt(T) + " " + std::to_string(seed) + " mom yes rot no dist gaussian");
  // Triclinic cells need 'tri' so that the shape, not only the volume, relaxes.
  command("fix md all npt temp " + fmt(T) + " " + fmt(T) + " 0.1 tri 0.0 0.0 1.0");
  command("run " + std::to_string(equilibrate));
  std::vector<fastmlip::io::Frame> out;
  for (int s = 0; s < count; ++s) {
    command("run " + std::to_string(interval));
    out.push_back(extract_frame());
  }
  return out;
}

}  // namespace cuni
