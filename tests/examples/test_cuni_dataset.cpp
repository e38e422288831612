// SPDX-License-Identifier: MIT
// Checks the CuNi dataset written by fastmlip-cuni-dataset (path in FASTMLIP_CUNI_DATASET):
// its labels against a fresh EAM evaluation, and the label conventions (force = -dE/dx,
// ASE stress = (1/V) dE/d(strain), tensile positive) against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "eam_lammps.hpp"
#include "graph/neighbor_list.hpp"
#include "io/extxyz.hpp"

namespace {

using fastmlip::io::Frame;

const std::vector<Frame>& dataset() {
  static const std::vector<Frame> frames = [] {
    const char* path = std::getenv("FASTMLIP_CUNI_DATASET");
    if (path == nullptr) {
      throw std::runtime_error("set FASTMLIP_CUNI_DATASET to the dataset written by fastmlip-cuni-dataset");
    }
    return fastmlip::io::read_extxyz(path);
  }();
  return frames;
}

cuni::EamLammps& eam() {
  static cuni::EamLammps e(FASTMLIP_CUNI_POTENTIAL);
  return e;
}

double energy_of(Frame f) {
  eam().label(f);
  return f.info_numbers("energy")[0];
}

double volume(const Frame& f) {
  const auto& c = *f.cell;  // lower-triangular
  return c[0] * c[4] * c[8];
}

TEST(CuniDataset, CoversWhatTheIssueAsksFor) {
  const auto& frames = dataset();
  ASSERT_GE(frames.size(), 150u);
  std::set<std::string> types;
  std::size_t smallest = SIZE_MAX, largest = 0;
  bool has_triclinic = false, has_cu = false, has_ni = false;
  for (const Frame& f : frames) {
    types.insert(*f.find_info("config_type"));
    smallest = std::min(smallest, f.natoms());
    largest = std::max(largest, f.natoms());
    has_triclinic |= (*f.cell)[3] != 0.0 || (*f.cell)[6] != 0.0 || (*f.cell)[7] != 0.0;
    for (const auto& s : f.species) {
      has_cu |= s == "Cu";
      has_ni |= s == "Ni";
    }
    ASSERT_TRUE(f.pbc[0] && f.pbc[1] && f.pbc[2]);
    ASSERT_EQ(f.info_numbers("stress").size(), 9u);
    ASSERT_EQ(f.info_numbers("free_energy"), f.info_numbers("energy"));
    ASSERT_NE(f.find_array("forces"), nullptr);
  }
  EXPECT_EQ(smallest, 4u);
  EXPECT_EQ(largest, 500u);
  EXPECT_TRUE(has_triclinic && has_cu && has_ni);
  for (const char* t : {"fcc_Cu", "fcc_Ni", "alloy", "strained", "md_300K", "md_1500K", "liquid", "vacancy", "slab100",
                        "slab111"}) {
    EXPECT_TRUE(types.count(t)) << "no frames of config_type " << t;
  }
}

// Regression: film bounds on an atomic plane, or atoms on a periodic edge of the rotated
// (111) lattice, let round-off drop single atoms, giving partial layers.
TEST(CuniDataset, SlabsHoldWholeAtomicPlanes) {
  for (const Frame& f : dataset()) {
    const std::string t = *f.find_info("config_type");
    if (t == "slab100") {
      EXPECT_EQ(f.natoms() % 36, 0u) << "line " << f.line;  // 3x3 cells x 2 planes x 2 atoms
    } else if (t == "slab111") {
      EXPECT_EQ(f.natoms() % 48, 0u) << "line " << f.line;  // 16 atoms per plane x 3 planes per [111] spacing
    }
  }
}

// Regression: the (111) slab cell was 4/3 of a crystal period wide along [11-2], so every
// slab111 frame had atoms 1.27-1.40 A from periodic images of others. Cu-Ni nearest neighbours
// are about 2.5 A; with seed 7 the rattled crystals and slabs stay above 2.0 A, the 2500 K
// liquid above 1.94 A. Distances include periodic images (the project's neighbor list, any
// cell shape). The bound, 1.8 A, leaves room below the liquid's closest pairs.
TEST(CuniDataset, NoTwoAtomsCloserThanPhysical) {
  constexpr double kMinDistance = 1.8;  // A
  const auto& frames = dataset();
  for (std::size_t index = 0; index < frames.size(); ++index) {
    const Frame& f = frames[index];
    const std::string type = *f.find_info("config_type");
    fastmlip::graph::NeighborListOptions options;
    options.cutoff = kMinDistance;
    fastmlip::graph::NeighborList nl;
    try {
      nl = fastmlip::graph::build_neighbor_list(f.positions, f.cell, f.pbc, options);
    } catch (const std::exception& e) {  // coincident sites
      ADD_FAILURE() << "frame " << index << " (config_type " << type << ", line " << f.line << "): " << e.what();
      continue;
    }
    if (nl.num_edges() == 0) {
      continue;
    }
    const auto centers = nl.centers();
    std::size_t best = 0;
    double best_d = INFINITY;
    for (std::size_t e = 0; e < nl.num_edges(); ++e) {
      const double* v = &nl.vectors[3 * e];
      const double d = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
      if (d < best_d) {
        best_d = d;
        best = e;
      }
    }
    std::ostringstream pair;
    pair << "atoms " << centers[best] << " (" << f.species[centers[best]] << ") and " << nl.neighbors[best] << " ("
         << f.species[nl.neighbors[best]] << ", image shift " << nl.shifts[3 * best] << " " << nl.shifts[3 * best + 1]
         << " " << nl.shifts[3 * best + 2] << ")";
    ADD_FAILURE() << "frame " << index << " (config_type " << type << ", line " << f.line << "): " << pair.str()
                  << " (0-based) are " << best_d << " A apart, closer than " << kMinDistance << " A; "
                  << nl.num_edges() / 2 << " such pairs in the frame";
  }
}

// Every 9th frame, re-evaluated from what was read back: catches unit, ordering, sign and
// formatting errors between LAMMPS and the file.
TEST(CuniDataset, LabelsMatchAFreshEvaluation) {
  const auto& frames = dataset();
  for (std::size_t i = 0; i < frames.size(); i += 9) {
    Frame f = frames[i];
    eam().label(f);
    const double e_file = frames[i].info_numbers("energy")[0];
    EXPECT_NEAR(f.info_numbers("energy")[0], e_file, 1e-10 * std::abs(e_file)) << "frame at line " << frames[i].line;
    const auto s_new = f.info_numbers("stress"), s_file = frames[i].info_numbers("stress");
    for (int k = 0; k < 9; ++k) {
      EXPECT_NEAR(s_new[k], s_file[k], 1e-12) << "stress component " << k << ", line " << frames[i].line;
    }
    const auto& f_new = f.find_array("forces")->numbers;
    const auto& f_file = frames[i].find_array("forces")->numbers;
    for (std::size_t k = 0; k < f_new.size(); ++k) {
      ASSERT_NEAR(f_new[k], f_file[k], 1e-9) << "force value " << k << ", line " << frames[i].line;
    }
  }
}

// The smallest strained (triclinic) frame and the smallest (111) slab (surfaces, vacuum),
// differentiated by hand.
std::vector<const Frame*> small_frames() {
  std::map<std::string, const Frame*> smallest;
  for (const Frame& f : dataset()) {
    const std::string t = *f.find_info("config_type");
    if ((t == "strained" || t == "slab111") && (!smallest.count(t) || f.natoms() < smallest[t]->natoms())) {
      smallest[t] = &f;
    }
  }
  std::vector<const Frame*> out;
  for (auto& [t, f] : smallest) {
    out.push_back(f);
  }
  return out;
}

TEST(CuniDataset, ForcesAreMinusTheEnergyGradient) {
  const double h = 1e-5;
  const auto frames = small_frames();
  ASSERT_EQ(frames.size(), 2u);
  for (const Frame* f0 : frames) {
    const auto& forces = f0->find_array("forces")->numbers;
    for (std::size_t a = 0; a < std::min<std::size_t>(f0->natoms(), 4); ++a) {
      for (int k = 0; k < 3; ++k) {
        Frame p = *f0, m = *f0;
        p.positions[3 * a + k] += h;
        m.positions[3 * a + k] -= h;
        const double fd = -(energy_of(p) - energy_of(m)) / (2 * h);
        EXPECT_NEAR(forces[3 * a + k], fd, 1e-6 + 1e-5 * std::abs(fd)) << "atom " << a << " dir " << k;
      }
    }
  }
}

// ASE: stress = (1/V) dE/d(strain). Strain r -> r (I + h e_ij) for i >= j, which keeps the
// cell lower-triangular; to first order rotations do not change E, so this is sigma_ij.
TEST(CuniDataset, StressIsTheStrainDerivativeWithAseSign) {
  const double h = 1e-6;
  const auto frames = small_frames();
  ASSERT_EQ(frames.size(), 2u);
  for (const Frame* f0 : frames) {
    const auto stress = f0->info_numbers("stress");
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j <= i; ++j) {
        auto deformed = [&](double eps) {
          Frame f = *f0;
          auto apply = [&](double* r) { r[j] += eps * r[i]; };
          for (std::size_t a = 0; a < f.natoms(); ++a) {
            apply(&f.positions[3 * a]);
          }
          for (int row = 0; row < 3; ++row) {
            apply(&(*f.cell)[3 * row]);
          }
          return f;
        };
        const double fd = (energy_of(deformed(h)) - energy_of(deformed(-h))) / (2 * h) / volume(*f0);
        EXPECT_NEAR(stress[3 * i + j], fd, 1e-7 + 1e-5 * std::abs(fd)) << "component " << i << j << " of "
                                                                       << *f0->find_info("config_type");
      }
    }
  }
}

// Physical anchors: a compressed crystal pushes outwards (negative ASE stress), and fcc Cu at
// its lattice constant is near zero stress with the EAM's cohesive energy.
TEST(CuniDataset, PhysicalSanity) {
  cuni::EamLammps& e = eam();
  Frame cu = e.build({"lattice fcc 3.615", "region box block 0 3 0 3 0 3", "create_box 2 box", "create_atoms 1 box"});
  Frame squeezed = e.build({"lattice fcc 3.5", "region box block 0 3 0 3 0 3", "create_box 2 box", "create_atoms 1 box"});
  e.label(cu);
  e.label(squeezed);
  EXPECT_NEAR(cu.info_numbers("energy")[0] / cu.natoms(), -3.54, 0.03);
  EXPECT_LT(squeezed.info_numbers("stress")[0], -1e-3);
  EXPECT_NEAR(cu.info_numbers("stress")[0], 0.0, 2e-3);
}

}  // namespace
