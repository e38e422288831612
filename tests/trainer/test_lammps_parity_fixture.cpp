// SPDX-License-Identifier: MIT
// The trainer's half of issue 7's parity check: "a structure evaluated by the trainer's model and
// by the plugin in LAMMPS from the exported file agrees within 1e-10 relative in double".
//
// This test trains a small MACE with the train-potential executable (float64, two epochs on a
// periodic Cu/Ni dataset written here), loads the exported file into the trainer's
// MaceTorchModel and evaluates three structures with it: a triclinic cell, a rattled fcc cell and
// an open cluster. It writes what it computed in the layout of the committed mace-torch fixtures
// (tests/reference/data/mace: index.json, a results file, the potential), into the directory
// given by FASTMLIP_TRAINER_PARITY_DIR. ctest runs it as the setup of plugin.trainer_parity_np*
// (tests/plugin/test_pair_trainer_parity.cpp), which runs LAMMPS with pair_style fastmlip/mace on
// the same structures and compares energy, per-atom energies, forces and virial at 1e-10.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "io/atomic_file.hpp"
#include "io/potential_file.hpp"
#include "models/mace.hpp"

namespace fastmlip::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Frame {
  std::vector<double> cell;  // 9 values, row-major lattice vectors; empty for an open cluster
  std::vector<double> positions;
  std::vector<int> z;
};

/// A rattled fcc cell of edge a (4 atoms) repeated `reps` times along x, Cu and Ni mixed.
Frame fcc_frame(double a, int reps, std::mt19937_64& rng) {
  std::normal_distribution<double> jitter(0.0, 0.08);
  const double basis[4][3] = {{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}};
  Frame f;
  f.cell = {a * reps, 0, 0, 0, a, 0, 0, 0, a};
  for (int r = 0; r < reps; ++r) {
    for (const auto& b : basis) {
      f.positions.push_back(a * (b[0] + r) + jitter(rng));
      f.positions.push_back(a * b[1] + jitter(rng));
      f.positions.push_back(a * b[2] + jitter(rng));
      f.z.push_back(rng() % 2 == 0 ? 28 : 29);
    }
  }
  return f;
}

/// Labels of a smooth pair potential (a Morse well cut off at 4.5 A). The model only has to
/// have been trained on something: the parity is between two evaluations of its weights.
void write_dataset(const std::string& path, int frames) {
  std::mt19937_64 rng(11);
  std::ofstream out(path);
  out.precision(17);
  for (int n = 0; n < frames; ++n) {
    const Frame f = fcc_frame(3.55 + 0.02 * (n % 5), 1 + n % 2, rng);
    const int na = static_cast<int>(f.z.size());
    double e = 0;
    std::vector<double> force(3 * na, 0.0);
    for (int i = 0; i < na; ++i) {
      for (int j = 0; j < na; ++j) {
        // Every image within the cut-off: the cells are at least 3.55 A on a side, so two
        // images either way suffice for 4.5 A.
        for (int ix = -2; ix <= 2; ++ix) {
          for (int iy = -2; iy <= 2; ++iy) {
            for (int iz = -2; iz <= 2; ++iz) {
              if (i == j && ix == 0 && iy == 0 && iz == 0) {
                continue;
              }
              double d[3];
              double r2 = 0;
              for (int k = 0; k < 3; ++k) {
                d[k] = f.positions[3 * j + k] - f.positions[3 * i + k] + ix * f.cell[k] + iy * f.cell[3 + k] +
                       iz * f.cell[6 + k];
                r2 += d[k] * d[k];
              }
              const double r = std::sqrt(r2);
              if (r >= 4.5) {
                continue;
              }
              const double x = std::exp(-1.4 * (r - 2.5));
              const double c = 0.5 * (1 + std::cos(M_PI * r / 4.5));
              const double dc = -0.5 * M_PI / 4.5 * std::sin(M_PI * r / 4.5);
              const double u = 0.3 * (x * x - 2 * x);
              const double du = 0.3 * (-2.8 * x * x + 2.8 * x);
              e += 0.5 * u * c;
              const double g = 0.5 * (du * c + u * dc) / r;  // dE/dr_j along d, half per ordered pair
              for (int k = 0; k < 3; ++k) {
                force[3 * i + k] += g * d[k];
                force[3 * j + k] -= g * d[k];
              }
            }
          }
        }
      }
    }
    for (int zi : f.z) {
      e += zi == 28 ? -4.3 : -3.5;
    }
    out << na << "\nLattice=\"";
    for (int k = 0; k < 9; ++k) {
      out << (k ? " " : "") << f.cell[k];
    }
    out << "\" Properties=species:S:1:pos:R:3:REF_forces:R:3 REF_energy=" << e << " pbc=\"T T T\"\n";
    for (int i = 0; i < na; ++i) {
      out << (f.z[i] == 28 ? "Ni" : "Cu");
      for (int k = 0; k < 3; ++k) {
        out << ' ' << f.positions[3 * i + k];
      }
      for (int k = 0; k < 3; ++k) {
        out << ' ' << force[3 * i + k];
      }
      out << '\n';
    }
  }
}

json rows(const torch::Tensor& t) {
  const auto c = t.contiguous();
  json out = json::array();
  for (std::int64_t i = 0; i < c.size(0); ++i) {
    json row = json::array();
    for (std::int64_t k = 0; k < c.size(1); ++k) {
      row.push_back(c[i][k].item<double>());
    }
    out.push_back(row);
  }
  return out;
}

json structure_json(const Frame& f) {
  json s;
  const bool periodic = !f.cell.empty();
  const auto n = static_cast<int>(f.z.size());
  s["atomic_numbers"] = f.z;
  s["pbc"] = std::vector<bool>(3, periodic);
  s["cell"] = periodic ? json::array({{f.cell[0], f.cell[1], f.cell[2]},
                                      {f.cell[3], f.cell[4], f.cell[5]},
                                      {f.cell[6], f.cell[7], f.cell[8]}})
                       : json::array({{0, 0, 0}, {0, 0, 0}, {0, 0, 0}});
  json pos = json::array();
  for (int i = 0; i < n; ++i) {
    pos.push_back({f.positions[3 * i], f.positions[3 * i + 1], f.positions[3 * i + 2]});
  }
  s["positions"] = pos;
  return s;
}

TEST(TrainerLammpsParityFixture, TrainExportAndEvaluate) {
  const char* env = std::getenv("FASTMLIP_TRAINER_PARITY_DIR");
  ASSERT_NE(env, nullptr) << "set FASTMLIP_TRAINER_PARITY_DIR to the directory to write";
  const fs::path dir(env);
  fastmlip::io::remove_tree(dir);
  fs::create_directories(dir);
  write_dataset((dir / "data.xyz").string(), 12);

  const std::string cmd = "cd '" + dir.string() + "' && OMP_NUM_THREADS=1 '" + FASTMLIP_TRAIN_POTENTIAL +
                          "' --name trained --train_file data.xyz --valid_fraction 0.25 --E0s average "
                          "--default_dtype float64 --r_max 4.0 --num_radial_basis 5 --num_channels 5 "
                          "--max_ell 2 --max_L 1 --correlation 3 --num_interactions 2 --radial_MLP '[8, 8]' "
                          "--MLP_irreps 4x0e --lr 0.02 --ema --ema_decay 0.9 --batch_capacity 12 "
                          "--max_num_epochs 2 --seed 3 > train.log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "train-potential failed; see " << (dir / "train.log");
  const std::string potential = "trained.safetensors";
  const io::PotentialFile file = io::read_potential_file((dir / potential).string());
  trainer::MaceTorchModel<double> model(file);

  // Structures unlike the training frames: a triclinic cell in LAMMPS' orientation (a along x,
  // b in the xy plane), a denser rattled fcc cell, and an open cluster.
  std::mt19937_64 rng(23);
  std::vector<std::pair<std::string, Frame>> frames;
  Frame tri;
  tri.cell = {5.1, 0, 0, 1.3, 4.7, 0, -0.9, 0.8, 4.9};
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int i = 0; i < 7; ++i) {
    // Points on a jittered grid in fractional coordinates keep atoms apart.
    const double fr[3] = {0.5 * (i % 2) + 0.1 * u(rng), 0.5 * ((i / 2) % 2) + 0.1 * u(rng),
                          0.33 * (i / 4) + 0.1 * u(rng)};
    for (int k = 0; k < 3; ++k) {
      tri.positions.push_back(fr[0] * tri.cell[k] + fr[1] * tri.cell[3 + k] + fr[2] * tri.cell[6 + k]);
    }
    tri.z.push_back(i % 3 == 0 ? 28 : 29);
  }
  frames.emplace_back("triclinic", tri);
  frames.emplace_back("fcc_rattled", fcc_frame(3.5, 2, rng));
  Frame cluster = fcc_frame(3.6, 1, rng);
  cluster.positions.insert(cluster.positions.end(), {1.8, 1.8, 1.8, -1.7, 0.2, 0.1});
  cluster.z.insert(cluster.z.end(), {29, 28});
  cluster.cell.clear();
  frames.emplace_back("cluster", cluster);

  json fixture;
  fixture["structures"] = json::object();
  fixture["results"] = json::array();
  for (const auto& [name, f] : frames) {
    trainer::MaceStructure s;
    s.positions = f.positions;
    for (int zi : f.z) {
      s.species.push_back(model.species_index(zi));
    }
    if (!f.cell.empty()) {
      std::array<double, 9> cell{};
      std::copy(f.cell.begin(), f.cell.end(), cell.begin());
      s.cell = cell;
      s.pbc = {true, true, true};
    }
    trainer::MaceForwardOptions opt;
    opt.virials = true;
    const trainer::MaceOutput out = model.forward(trainer::make_mace_batch({s}, model.cutoff()), opt);
    ASSERT_TRUE(torch::isfinite(out.forces).all().item<bool>()) << name;
    fixture["structures"][name] = structure_json(f);
    json r;
    r["structure"] = name;
    r["head"] = "Default";
    r["energy"] = out.energy[0].item<double>();
    std::vector<double> node(out.node_energy.size(0));
    for (std::size_t i = 0; i < node.size(); ++i) {
      node[i] = out.node_energy[static_cast<std::int64_t>(i)].item<double>();
    }
    r["node_energy"] = node;
    r["forces"] = rows(out.forces);
    r["virial"] = rows(out.virials[0]);
    fixture["results"].push_back(r);
  }
  std::ofstream(dir / "results.json") << fixture.dump(1);

  std::vector<int> species;
  for (const auto& sp : model.species()) {
    species.push_back(sp.z);
  }
  json entry;
  entry["name"] = "trainer_export";
  entry["potential"] = potential;
  entry["results"] = "results.json";
  entry["species"] = species;
  entry["committed"] = true;
  std::ofstream(dir / "index.json") << json{{"models", json::array({entry})}}.dump(1);
}

}  // namespace
}  // namespace fastmlip::test
