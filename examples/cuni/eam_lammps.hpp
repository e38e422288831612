// SPDX-License-Identifier: MIT
#pragma once
/// \file A small wrapper around the LAMMPS library interface for the CuNi example: build
/// structures with LAMMPS' lattice commands, label frames with the CuNi EAM potential
/// (energy, forces, stress in ASE's conventions) and run MD to sample configurations.
///
/// Example code, not part of the core: the core knows nothing of LAMMPS.
#include <cstdint>
#include <string>
#include <vector>

#include "io/extxyz.hpp"

namespace cuni {

/// One LAMMPS instance (serial, no log, no screen) with the CuNi EAM potential.
class EamLammps {
 public:
  /// `potential_file`: path to CuNi.eam.alloy (shipped in LAMMPS' potentials/ folder).
  explicit EamLammps(std::string potential_file);
  ~EamLammps();
  EamLammps(const EamLammps&) = delete;
  EamLammps& operator=(const EamLammps&) = delete;

  /// Runs LAMMPS commands that create a box and atoms of types 1 (Cu) and 2 (Ni) in a fresh
  /// simulation, and returns them as a frame (cell in LAMMPS' lower-triangular form, origin
  /// at the box corner). The commands must not set units, atom_style or the pair style.
  fastmlip::io::Frame build(const std::vector<std::string>& commands);

  /// Evaluates the EAM on `frame` and stores the labels: info `energy` and `free_energy`
  /// (eV; equal for a classical potential), `stress` (9 values, eV/A^3, ASE sign: tensile
  /// positive, potential part only) and the per-atom column `forces` (eV/A).
  /// The frame's cell must be lower-triangular (a along x, b in the xy plane), as written by
  /// build() and by this example's generator; other cells are refused.
  void label(fastmlip::io::Frame& frame);

  /// Runs NPT molecular dynamics from `frame` at temperature `T` (K) and zero pressure, with a
  /// time step of 1 fs, and returns `count` snapshots taken every `interval` steps after
  /// `equilibrate` steps. Snapshots are unlabelled.
  std::vector<fastmlip::io::Frame> sample_md(const fastmlip::io::Frame& frame, double T, int equilibrate, int interval,
                                             int count, std::uint32_t seed);

 private:
  void command(const std::string& cmd);
  void load_frame(const fastmlip::io::Frame& frame);
  fastmlip::io::Frame extract_frame();
  void* m_lmp = nullptr;
  std::string m_potential;
};

}  // namespace cuni
