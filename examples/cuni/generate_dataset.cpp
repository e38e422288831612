// SPDX-License-Identifier: MIT
// fastmlip-cuni-dataset: a labelled Cu-Ni extended-XYZ dataset from LAMMPS' CuNi EAM
// (Onat & Durukanoglu 2014, shipped as potentials/CuNi.eam.alloy in the LAMMPS source).
//
// It stands in for DFT data: seeded, reproducible, cheap, and varied enough that batching has
// real work to do (4 to 500 atoms). Configurations: fcc Cu and Ni, random solid solutions,
// strained (triclinic) cells, NPT MD snapshots from 300 K to the liquid, vacancies, and (100)
// and (111) slabs with vacuum. Labels follow ASE: energy, free_energy, stress (eV/A^3,
// tensile positive), forces.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "eam_lammps.hpp"
#include "io/extxyz.hpp"

namespace {

using fastmlip::io::Frame;

// The project's portable stream: the same dataset bytes on every platform and library.
using Rng = fastmlip::Rng;

constexpr double kACu = 3.615, kANi = 3.52;  // fcc lattice constants (A)
double vegard(double x_ni) { return (1.0 - x_ni) * kACu + x_ni * kANi; }

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::vector<std::string> fcc_bulk(double a, int n) {
  return {"lattice fcc " + fmt(a), "region box block 0 " + std::to_string(n) + " 0 " + std::to_string(n) + " 0 " + std::to_string(n),
          "create_box 2 box", "create_atoms 1 box"};
}

// The film regions' z bounds sit midway between atomic planes: on a plane, round-off would
// decide atom by atom whether it belongs, leaving partial layers.

// (100) film: 2*layers atomic planes (spacing a/2) under 4 cells of vacuum (> the 6.39 A cutoff).
std::vector<std::string> slab100(double a, int n, int layers) {
  return {"lattice fcc " + fmt(a),
          "region box block 0 " + std::to_string(n) + " 0 " + std::to_string(n) + " 0 " + std::to_string(layers + 4),
          "create_box 2 box",
          "region film block 0 " + std::to_string(n) + " 0 " + std::to_string(n) + " -0.25 " + fmt(layers - 0.25),
          "create_atoms 1 region film"};
}

// (111) film: z along [111], x along [1-10], y along [11-2]. Each (111) plane is a hexagonal
// net of spacing a/sqrt(2); planes are a/sqrt(3) apart, stacked ABC.
//
// The box must be a whole number of periods of that crystal along x and y, or atoms meet their
// periodic images. LAMMPS' lattice spacings for a rotated lattice are not those periods but the
// extents of the rotated cubic cell: x a*sqrt(2) (two periods of (a/2)[1-10]), y 4a/sqrt(6)
// (4/3 of a period of (a/2)[11-2], a*sqrt(6)/2), z a*sqrt(3) (one period of a[111], three
// planes). So y takes 1.5 spacings (two periods): a 2 x 1.5 box is 4 x 4 rows, 16 atoms per
// plane, 48 per lattice spacing along z. (A box of 1 spacing along y, 4/3 of a period, put
// atoms near the y boundary about 1.5 A from periodic images of others.)
//
// The rotated lattice also puts atoms on the periodic x/y box edges, where round-off drops some
// of them; the origin shift (in lattice spacings) moves every atom off the edges.
std::vector<std::string> slab111(double a, int layers) {
  return {"lattice fcc " + fmt(a) + " orient x 1 -1 0 orient y 1 1 -2 orient z 1 1 1 origin 0.05 0.05 0.05",
          "region box block 0 2 0 1.5 0 " + std::to_string(layers + 2), "create_box 2 box",
          "region film block 0 2 0 1.5 -0.1667 " + fmt(layers - 0.1667), "create_atoms 1 region film"};
}

void set_composition(Frame& f, double x_ni, Rng& rng) {
  const int n = static_cast<int>(f.natoms());
  std::vector<int> idx(n);
  for (int i = 0; i < n; ++i) {
    idx[i] = i;
  }
  for (int i = n - 1; i > 0; --i) {  // Fisher-Yates with our RNG
    std::swap(idx[i], idx[rng.below(static_cast<std::uint64_t>(i) + 1)]);
  }
  const int n_ni = static_cast<int>(std::lround(x_ni * n));
  for (int i = 0; i < n; ++i) {
    f.species[idx[i]] = i < n_ni ? "Ni" : "Cu";
  }
}

void rattle(Frame& f, double sigma, Rng& rng) {
  for (double& x : f.positions) {
    x += sigma * rng.normal();
  }
}

// Homogeneous deformation r' = r (I + E) with E lower-triangular: any deformation up to a
// rotation, and it keeps the cell in LAMMPS' lower-triangular form.
void strain(Frame& f, double amplitude, Rng& rng) {
  double e[3][3] = {};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j <= i; ++j) {
      e[i][j] = rng.uniform(-amplitude, amplitude);
    }
  }
  auto apply = [&](double* r) {
    double out[3];
    for (int j = 0; j < 3; ++j) {
      out[j] = r[j] + r[0] * e[0][j] + r[1] * e[1][j] + r[2] * e[2][j];
    }
    std::copy(out, out + 3, r);
  };
  for (std::size_t a = 0; a < f.natoms(); ++a) {
    apply(&f.positions[3 * a]);
  }
  for (int row = 0; row < 3; ++row) {
    apply(&(*f.cell)[3 * row]);
  }
}

void remove_atom(Frame& f, int i) {
  f.species.erase(f.species.begin() + i);
  f.positions.erase(f.positions.begin() + 3 * i, f.positions.begin() + 3 * i + 3);
}

struct Options {
  std::string potential = FASTMLIP_CUNI_POTENTIAL;
  std::string output = "cuni-eam.xyz";
  std::uint64_t seed = 20261122;
  int scale = 1;
};

void usage(std::ostream& o) {
  o << "usage: fastmlip-cuni-dataset [--output FILE] [--seed N] [--scale K] [--potential CuNi.eam.alloy]\n"
       "  Writes a labelled Cu-Ni extended-XYZ dataset (EAM energies, forces, stress).\n"
       "  --output FILE    where to write (atomically); default cuni-eam.xyz\n"
       "  --seed N         seed of every random choice; the same seed gives the same file\n"
       "  --scale K        K times as many frames of each kind (default 1: about 200 frames)\n"
       "  --potential F    the CuNi.eam.alloy file; default: the one in the LAMMPS source tree\n";
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        throw fastmlip::InputError("fastmlip-cuni-dataset: " + a + " needs a value (see --help)");
      }
      return argv[++i];
    };
    auto integer = [&](const std::string& v, long lo) {
      char* end = nullptr;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (*end != '\0' || x < lo) {
        throw fastmlip::InputError("fastmlip-cuni-dataset: " + a + " needs an integer >= " + std::to_string(lo) +
                                   ", got '" + v + "'");
      }
      return x;
    };
    if (a == "--help" || a == "-h") {
      usage(std::cout);
      std::exit(0);
    } else if (a == "--output") {
      o.output = value();
    } else if (a == "--seed") {
      o.seed = static_cast<std::uint64_t>(integer(value(), 0));
    } else if (a == "--scale") {
      o.scale = static_cast<int>(integer(value(), 1));
    } else if (a == "--potential") {
      o.potential = value();
    } else {
      throw fastmlip::InputError("fastmlip-cuni-dataset: unknown option '" + a + "' (see --help)");
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options opt = parse(argc, argv);
    if (std::FILE* f = std::fopen(opt.potential.c_str(), "r")) {
      std::fclose(f);
    } else {
      throw fastmlip::FileError(opt.potential, 0, "cannot read the EAM potential; pass --potential PATH to CuNi.eam.alloy");
    }
    Rng rng{opt.seed};
    cuni::EamLammps lmp(opt.potential);
    std::vector<Frame> frames;
    auto add = [&](Frame f, const std::string& config_type) {
      f.set_info("config_type", config_type);
      frames.push_back(std::move(f));
    };
    const double compositions[] = {0.1, 0.25, 0.5, 0.75, 0.9};

    for (int rep = 0; rep < opt.scale; ++rep) {
      // Pure fcc crystals, 4 to 500 atoms, thermally rattled.
      for (double x_ni : {0.0, 1.0}) {
        for (int n : {1, 2, 3, 4, 5}) {
          for (int k = 0; k < 3; ++k) {
            Frame f = lmp.build(fcc_bulk(vegard(x_ni), n));
            set_composition(f, x_ni, rng);
            rattle(f, rng.uniform(0.02, 0.1), rng);
            add(std::move(f), x_ni == 0.0 ? "fcc_Cu" : "fcc_Ni");
          }
        }
      }
      // Random solid solutions at several compositions.
      for (double x_ni : compositions) {
        for (int n : {2, 3, 4}) {
          for (int k = 0; k < 3; ++k) {
            Frame f = lmp.build(fcc_bulk(vegard(x_ni), n));
            set_composition(f, x_ni, rng);
            rattle(f, rng.uniform(0.02, 0.1), rng);
            add(std::move(f), "alloy");
          }
        }
      }
      // Strained (generally triclinic) cells, up to 4% per component.
      for (int k = 0; k < 30; ++k) {
        const double x_ni = rng.uniform();
        Frame f = lmp.build(fcc_bulk(vegard(x_ni), 1 + static_cast<int>(rng.below(3))));
        set_composition(f, x_ni, rng);
        strain(f, 0.04, rng);
        rattle(f, 0.03, rng);
        add(std::move(f), "strained");
      }
      // MD snapshots from 300 K to the liquid (the EAM melts near 1350-1700 K).
      for (double T : {300.0, 600.0, 900.0, 1200.0, 1500.0, 2500.0}) {
        const double x_ni = compositions[rng.below(5)];
        Frame start = lmp.build(fcc_bulk(vegard(x_ni), T > 2000 ? 3 : 4));
        set_composition(start, x_ni, rng);
        const int equilibrate = T > 2000 ? 4000 : 1000;  // 4 ps to melt fully
        for (Frame& f : lmp.sample_md(start, T, equilibrate, 200, 8, static_cast<std::uint32_t>(1 + rng.below(1u << 30)))) {
          add(std::move(f), T > 2000 ? "liquid" : "md_" + std::to_string(static_cast<int>(T)) + "K");
        }
      }
      // Vacancies.
      for (int k = 0; k < 20; ++k) {
        const double x_ni = rng.uniform();
        Frame f = lmp.build(fcc_bulk(vegard(x_ni), 2 + static_cast<int>(rng.below(3))));
        set_composition(f, x_ni, rng);
        for (int v = 0, nv = 1 + static_cast<int>(rng.below(2)); v < nv; ++v) {
          remove_atom(f, static_cast<int>(rng.below(f.natoms())));
        }
        rattle(f, 0.05, rng);
        add(std::move(f), "vacancy");
      }
      // Slabs with vacuum: Cu, Ni and a 50/50 alloy.
      for (double x_ni : {0.0, 1.0, 0.5}) {
        for (int k = 0; k < 3; ++k) {
          Frame s100 = lmp.build(slab100(vegard(x_ni), 3, 2 + k));
          set_composition(s100, x_ni, rng);
          rattle(s100, 0.05, rng);
          add(std::move(s100), "slab100");
          Frame s111 = lmp.build(slab111(vegard(x_ni), 1 + k));
          set_composition(s111, x_ni, rng);
          rattle(s111, 0.05, rng);
          add(std::move(s111), "slab111");
        }
      }
    }
    std::size_t atoms = 0, smallest = SIZE_MAX, largest = 0;
    for (Frame& f : frames) {
      lmp.label(f);
      atoms += f.natoms();
      smallest = std::min(smallest, f.natoms());
      largest = std::max(largest, f.natoms());
    }
    fastmlip::io::write_extxyz(opt.output, frames);
    std::cerr << "fastmlip-cuni-dataset: wrote " << frames.size() << " frames (" << atoms << " atoms, " << smallest
              << " to " << largest << " per frame) to " << opt.output << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ERROR: " << e.what() << "\n";
    return 1;
  }
}
