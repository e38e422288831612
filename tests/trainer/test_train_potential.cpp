// SPDX-License-Identifier: MIT
// The train-potential executable end to end, run as a user runs it (std::system):
//  * --help prints the options table; bad input (an unknown option, a missing training file, an
//    option that is not implemented yet) exits 1 with the message on stderr;
//  * a tiny MACE trained on a tiny Cu/Ni dataset (written here, Lennard-Jones labels) for three
//    epochs: the training loss decreases, the CSV has the three epochs, the exported file holds
//    the EMA weights of the last checkpoint, and MaceModel (the plugin's evaluator) gives the
//    trainer model's energy from it to 1e-10 relative;
//  * 2 epochs, then --restart from the checkpoint and a third, equal 3 straight epochs bitwise
//    (parameters, optimiser and EMA state, the CSV, the exported file's bytes);
//  * fine-tuning the exported file (--foundation_model) for an epoch; the same run on 2 ranks;
//  * data parallel: 1 rank with --accumulate_bins 2 equals 2 ranks to round-off; the overlapped
//    and the blocking all-reduce, and --prefetch 0 and 2, give bitwise the same run;
//  * a rank killed with SIGKILL ends the job with a message, no hang, and the checkpoint it
//    leaves restarts on one rank.
//  * the outputs: per-epoch JSON metrics per config_type, the learning-curve SVG, the best model
//    (the weights of the epoch with the lowest validation loss, checked against that epoch's kept
//    checkpoint), --test_file, --eval_interval, and `train-potential eval` reproducing the test
//    metrics and the model's predictions.
//  * --model chgnet: fine-tuning the shipped CHGNet 0.3.0 on the MPtrj JSON fixture (magmoms
//    included), its export evaluated by the core ChgnetModel as by the trainer, a bitwise
//    restart, 2 ranks, --direct_heads, and the refusals (no --foundation_model, MACE options).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../models/chgnet_test_util.hpp"
#include "../models/mace_test_graph.hpp"
#include "io/atomic_file.hpp"
#include "io/extxyz.hpp"
#include "io/potential_file.hpp"
#include "models/chgnet.hpp"
#include "models/device.hpp"
#include "models/mace.hpp"
#include "models/mace/mace_model.hpp"
#include "nccl.hpp"
#include "train/checkpoint.hpp"

namespace fastmlip::test {
namespace {

namespace fs = std::filesystem;
using Exec = Kokkos::DefaultHostExecutionSpace;

const std::string kExe = FASTMLIP_TRAIN_POTENTIAL;
const std::string kMpiexec = FASTMLIP_MPIEXEC_LINE;
const std::string kReferenceData = FASTMLIP_REFERENCE_DATA_DIR;

struct Result {
  int status = -1;
  std::string out, err;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Runs train-potential with `args` (shell words) in `dir`.
Result run(const std::string& dir, const std::string& args, const std::string& launcher = "") {
  const std::string out = dir + "/stdout.txt", err = dir + "/stderr.txt";
  const std::string cmd = "cd '" + dir + "' && OMP_NUM_THREADS=1 " + launcher + " '" + kExe + "' " + args +
                          " > '" + out + "' 2> '" + err + "'";
  const int rc = std::system(cmd.c_str());
  Result r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

std::string temp_dir(const std::string& tag) {
  const fs::path p = fs::temp_directory_path() / ("fastmlip_train_potential_" + tag + "_" +
                                                  std::to_string(static_cast<long>(::getpid())));
  fastmlip::io::remove_tree(p);
  fs::create_directories(p);
  return p.string();
}

/// Lennard-Jones energy and forces (species-dependent sigma), the labels of the tiny dataset.
/// Open clusters on a jittered cubic grid, so no two atoms come close. `typed`: frames alternate
/// between config_type=even and odd. `periodic`: each cluster in a 12 A cubic cell (far from its
/// images at the test models' cutoff) with its stress, -(1/V) sum over pairs d (x) f, as a label;
/// `virials` adds the virials, V times minus the stress, as a label too.
void write_dataset(const std::string& path, int frames, bool typed = false, bool periodic = false,
                   bool virials = false) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-0.15, 0.15);
  std::ofstream out(path);
  out.precision(17);
  for (int f = 0; f < frames; ++f) {
    const int n = 3 + f % 4;
    std::vector<double> x(3 * n);
    std::vector<int> z(n);
    for (int i = 0; i < n; ++i) {
      x[3 * i + 0] = 2.4 * (i % 2) + u(rng);
      x[3 * i + 1] = 2.4 * ((i / 2) % 2) + u(rng);
      x[3 * i + 2] = 2.4 * (i / 4) + u(rng);
      z[i] = (i + f) % 3 == 0 ? 28 : 29;
    }
    double e = 0;
    std::vector<double> F(3 * n, 0.0);
    double w[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) {
        double d[3], r2 = 0;
        for (int a = 0; a < 3; ++a) {
          d[a] = x[3 * i + a] - x[3 * j + a];
          r2 += d[a] * d[a];
        }
        const double s = (z[i] == 28 || z[j] == 28) ? 2.2 : 2.3, eps = 0.4;
        const double s6 = std::pow(s * s / r2, 3);
        e += 4 * eps * (s6 * s6 - s6);
        const double g = 24 * eps * (2 * s6 * s6 - s6) / r2;  // -dE/dr / r
        for (int a = 0; a < 3; ++a) {
          F[3 * i + a] += g * d[a];
          F[3 * j + a] -= g * d[a];
          for (int b = 0; b < 3; ++b) {
            w[3 * a + b] += g * d[a] * d[b];
          }
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      e += z[i] == 28 ? -4.0 : -3.5;
    }
    out << n << "\nProperties=species:S:1:pos:R:3:REF_forces:R:3 REF_energy=" << e;
    if (periodic) {
      out << " Lattice=\"12 0 0 0 12 0 0 0 12\" pbc=\"T T T\" REF_stress=\"";
      for (int k = 0; k < 9; ++k) {
        out << (k > 0 ? " " : "") << -w[k] / (12.0 * 12.0 * 12.0);
      }
      out << '"';
      if (virials) {
        out << " REF_virials=\"";
        for (int k = 0; k < 9; ++k) {
          out << (k > 0 ? " " : "") << w[k];
        }
        out << '"';
      }
    } else {
      out << " pbc=\"F F F\"";
    }
    if (typed) {
      out << " config_type=" << (f % 2 == 0 ? "even" : "odd");
    }
    out << '\n';
    for (int i = 0; i < n; ++i) {
      out << (z[i] == 28 ? "Ni" : "Cu") << ' ' << x[3 * i] << ' ' << x[3 * i + 1] << ' ' << x[3 * i + 2]
          << ' '
          << F[3 * i] << ' ' << F[3 * i + 1] << ' ' << F[3 * i + 2] << '\n';
    }
  }
}

/// The trainer's view of a test structure (species indices as they are).
trainer::MaceStructure mace_structure(const Structure& s) {
  trainer::MaceStructure ms;
  ms.positions = s.positions;
  ms.species = s.species;
  ms.cell = s.cell;
  ms.pbc = s.pbc;
  return ms;
}

/// A tiny model and run; work_dir and max_num_epochs come on the command line.
void write_config(const std::string& path, const std::string& data) {
  std::ofstream out(path);
  out << "name: tiny\ntrain_file: " << data << "\nvalid_fraction: 0.25\nE0s: average\n"
      << "r_max: 3.6\nnum_radial_basis: 4\nnum_channels: 4\nmax_ell: 2\nmax_L: 1\ncorrelation: 2\n"
      << "num_interactions: 2\nradial_MLP: [8, 8]\nMLP_irreps: 4x0e\nforces_weight: 10\nlr: 0.01\n"
      << "ema: true\nema_decay: 0.9\nbatch_capacity: 16\nscheduler_patience: 0\nseed: 5\n";
}

std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    std::string c;
    while (std::getline(ls, c, ',')) {
      cells.push_back(c);
    }
    rows.push_back(cells);
  }
  return rows;
}

TEST(TrainPotential, HelpPrintsTheOptionsTable) {
  const std::string dir = temp_dir("help");
  const Result r = run(dir, "--help");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("--batch_capacity"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--foundation_model"), std::string::npos);
  EXPECT_NE(r.out.find("train-potential eval --help"), std::string::npos);
  fastmlip::io::remove_tree(dir);
}

TEST(TrainPotential, BadInputExitsWithTheMessage) {
  const std::string dir = temp_dir("bad");
  Result r = run(dir, "--name x --train_file data.xyz --r_maxx 4");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("train-potential: error: command line (--r_maxx): unknown option 'r_maxx' "
                       "(did you mean 'r_max'?)"),
            std::string::npos)
      << r.err;

  r = run(dir, "--name x --train_file missing.xyz");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("train-potential: error: missing.xyz: cannot open the dataset"), std::string::npos)
      << r.err;

  r = run(dir, "--train_file missing.xyz");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("name"), std::string::npos) << r.err;

  // A bad test file stops the run before the training.
  write_dataset(dir + "/data.xyz", 4);
  r = run(dir, "--name x --train_file data.xyz --test_file missing.xyz");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("train-potential: error: missing.xyz: cannot open the dataset"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("epoch 1"), std::string::npos) << r.out;
  // Fine-tuning a Cu/Ni model on data with Al: the frame and the atom are named.
  std::ofstream(dir + "/al.xyz") << "2\nProperties=species:S:1:pos:R:3:REF_forces:R:3 REF_energy=-1.0 "
                                    "pbc=\"F F F\"\nCu 0 0 0 0 0 0\nAl 2.5 0 0 0 0 0\n";
  r = run(dir, "--name x --train_file al.xyz --valid_file al.xyz --foundation_model '" +
                   kReferenceData + "/mace/mace_1int_L0_corr1_ell1.safetensors'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("al.xyz:1 (frame 1): atom 2 has Z = 13, which the model does not have"),
            std::string::npos)
      << r.err;
  // --device cuda where this build or machine cannot: why, and what to do, before any data is read.
  if (const std::string problem = trainer::device_problem(torch::Device(torch::kCUDA)); !problem.empty()) {
    for (const char* model : {"mace", "chgnet"}) {
      r = run(dir, std::string("--name x --model ") + model + " --train_file missing.xyz --device cuda");
      EXPECT_EQ(r.status, 1);
      EXPECT_NE(r.err.find("train-potential: error: option 'device' (command line): " + problem),
                std::string::npos)
          << r.err;
    }
    if (!trainer::device_kernels_cuda()) {
      EXPECT_NE(r.err.find("build the trainer-cuda preset"), std::string::npos) << r.err;
    }
  }
  // --allreduce nccl where it cannot run (here: a CPU model, or a build without NCCL).
  r = run(dir, "--name x --train_file missing.xyz --allreduce nccl");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("train-potential: error: option 'allreduce' (command line): " +
                       trainer::nccl_problem(torch::kCPU, MPI_COMM_WORLD)),
            std::string::npos)
      << r.err;
  r = run(dir, "--name x --train_file data.xyz --foundation_model m.safetensors --r_max 4");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("train-potential: error: option 'r_max' (command line) cannot be combined with "
                       "--foundation_model"),
            std::string::npos)
      << r.err;
  fastmlip::io::remove_tree(dir);
}

TEST(TrainPotential, TrainsExportsAndRestartsBitwise) {
  const std::string dir = temp_dir("train");
  write_dataset(dir + "/data.xyz", 12);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");

  const Result a = run(dir, "--config tiny.yaml --work_dir straight --max_num_epochs 3");
  ASSERT_EQ(a.status, 0) << a.out << a.err;
  EXPECT_NE(a.out.find("epoch 3/3"), std::string::npos) << a.out;
  const Result b1 = run(dir, "--config tiny.yaml --work_dir split --max_num_epochs 2");
  ASSERT_EQ(b1.status, 0) << b1.out << b1.err;
  const Result b2 =
      run(dir,
          "--config tiny.yaml --work_dir split --max_num_epochs 3 --restart split/checkpoints/tiny.ckpt");
  ASSERT_EQ(b2.status, 0) << b2.out << b2.err;
  EXPECT_NE(b2.out.find("restart: split/checkpoints/tiny.ckpt after epoch 2"), std::string::npos) << b2.out;

  // The CSV: a header and three epochs, the training loss going down.
  const std::string csv = read_text(dir + "/straight/results/tiny_train.csv");
  const auto rows = csv_rows(csv);
  ASSERT_EQ(rows.size(), 4u) << csv;
  EXPECT_EQ(rows[0][0], "epoch");
  EXPECT_EQ(rows[0].size(), 12u) << csv;
  for (int e = 1; e <= 3; ++e) {
    ASSERT_EQ(std::count(csv.begin(), csv.end(), ','), 4 * 11) << csv;
    ASSERT_GE(rows[e].size(), 8u) << csv;  // (the stress and virial columns are empty here)
    EXPECT_EQ(rows[e][0], std::to_string(e));
    EXPECT_GT(std::stod(rows[e][5]), 0.0);  // MAE of E/atom
  }
  EXPECT_LT(std::stod(rows[3][2]), std::stod(rows[1][2])) << csv;

  // Restart: the same state, CSV, JSON, best model and exported bytes as the straight run.
  EXPECT_EQ(read_text(dir + "/split/results/tiny_train.csv"), csv);
  EXPECT_EQ(read_text(dir + "/split/results/tiny_train.json"),
            read_text(dir + "/straight/results/tiny_train.json"));
  EXPECT_EQ(read_text(dir + "/split/tiny_best.safetensors"),
            read_text(dir + "/straight/tiny_best.safetensors"));
  const auto sa = trainer::train::read_checkpoint(dir + "/straight/checkpoints/tiny.ckpt");
  const auto sb = trainer::train::read_checkpoint(dir + "/split/checkpoints/tiny.ckpt");
  ASSERT_EQ(sa.tensors.size(), sb.tensors.size());
  for (const auto& [k, t] : sa.tensors) {
    ASSERT_EQ(sb.tensors.count(k), 1u) << k;
    EXPECT_TRUE(torch::equal(t, sb.tensors.at(k))) << k;
  }
  EXPECT_EQ(sa.ints, sb.ints);
  EXPECT_EQ(sa.reals, sb.reals);
  const std::string file_a = dir + "/straight/tiny.safetensors";
  EXPECT_EQ(read_text(file_a), read_text(dir + "/split/tiny.safetensors"));

  // The export holds the EMA weights, and the plugin's MaceModel evaluates it as the trainer does.
  const io::PotentialFile pot = io::read_potential_file(file_a);
  trainer::MaceTorchModel<double> model(pot);
  for (const auto& [name, p] : model.named_parameters()) {
    EXPECT_TRUE(torch::equal(p.detach(), sa.tensor("ema/" + name))) << name;
  }
  models::MaceModel<Exec, double> plugin(pot);
  const int species = static_cast<int>(model.species().size());
  for (std::uint64_t seed : {11u, 12u}) {
    const Structure s = random_structure(5, 3.0, 1.6, species, seed, seed % 2 == 0);
    const auto out = model.forward(trainer::make_mace_batch({mace_structure(s)}, model.cutoff()));
    const double e_trainer = out.energy[0].item<double>();
    const auto g = folded_graph<double>(s, plugin.cutoff());
    models::MaceResult<double> r;
    plugin.compute(g.view(), nullptr, false, r);
    EXPECT_NEAR(r.energy, e_trainer, 1e-10 * std::max(1.0, std::abs(e_trainer))) << "seed " << seed;
  }

  // Fine-tuning the exported model for an epoch.
  const Result ft = run(dir, "--name ft --train_file data.xyz --foundation_model straight/tiny.safetensors "
                             "--max_num_epochs 1 --batch_capacity 16 --work_dir ft");
  ASSERT_EQ(ft.status, 0) << ft.out << ft.err;
  EXPECT_NE(ft.out.find("model: fine-tuning straight/tiny.safetensors"), std::string::npos) << ft.out;
  EXPECT_NO_THROW((models::MaceModel<Exec, double>(io::read_potential_file(dir + "/ft/ft.safetensors"))));
  fastmlip::io::remove_tree(dir);
}

// Fine-tuning MACE-MPA-0 / OMAT-0's architecture (Density blocks, Agnesi transform, ZBL; the
// reduced-width fixture) from the command line for an epoch; the export runs in MaceModel.
TEST(TrainPotential, FineTunesTheDensityAgnesiArchitecture) {
  const std::string dir = temp_dir("mpa");
  write_dataset(dir + "/data.xyz", 8);
  const std::string foundation = kReferenceData + "/mace/ssmace_2int_L1_corr2_ell3_density_agnesi_zbl.safetensors";
  const Result ft = run(dir, "--name mpa --train_file data.xyz --foundation_model '" + foundation +
                                 "' --max_num_epochs 1 --batch_capacity 16 --work_dir ft");
  ASSERT_EQ(ft.status, 0) << ft.out << ft.err;
  EXPECT_NE(ft.out.find("epoch 1"), std::string::npos) << ft.out;
  const auto pot = io::read_potential_file(dir + "/ft/mpa.safetensors");
  EXPECT_EQ(pot.meta<std::string>("/hyperparameters/distance_transform"), "Agnesi");
  EXPECT_NO_THROW((models::MaceModel<Exec, double>(pot)));
  fastmlip::io::remove_tree(dir);
}

// MACE-MPA-0 / OMAT-0's architecture trained from scratch from the command line, with mace_run_train's
// option names; the export is that architecture, and these options with --foundation_model are refused.
TEST(TrainPotential, TrainsAFreshDensityAgnesiModel) {
  const std::string dir = temp_dir("mpa_fresh");
  write_dataset(dir + "/data.xyz", 8);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const std::string blocks =
      " --interaction_first RealAgnosticDensityInteractionBlock --interaction "
      "RealAgnosticDensityResidualInteractionBlock --distance_transform Agnesi --pair_repulsion true";
  const Result r = run(dir, "--config tiny.yaml --work_dir fresh --max_num_epochs 1" + blocks);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("epoch 1"), std::string::npos) << r.out;
  const auto pot = io::read_potential_file(dir + "/fresh/tiny.safetensors");
  EXPECT_EQ(pot.meta<std::string>("/hyperparameters/distance_transform"), "Agnesi");
  EXPECT_EQ(pot.meta<std::string>("/hyperparameters/interactions/0/class"),
            "RealAgnosticDensityInteractionBlock");
  EXPECT_EQ(pot.meta<std::string>("/hyperparameters/interactions/1/class"),
            "RealAgnosticDensityResidualInteractionBlock");
  EXPECT_TRUE(pot.has_meta("/hyperparameters/zbl/p"));
  EXPECT_NO_THROW((models::MaceModel<Exec, double>(pot)));

  const Result bad = run(dir,
                         "--name x --train_file data.xyz --foundation_model fresh/tiny.safetensors "
                         "--distance_transform Agnesi --work_dir ft");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("option 'distance_transform'"), std::string::npos) << bad.err;
  fastmlip::io::remove_tree(dir);
}

// mace_run_train's --radial_type and the Soft transform, from the command line: the export has
// that basis and transform, and the pair styles' model loads it; an unknown basis is refused by
// the option parser, naming the choices.
TEST(TrainPotential, TrainsAFreshGaussianSoftModel) {
  const std::string dir = temp_dir("gauss_soft");
  write_dataset(dir + "/data.xyz", 8);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result r = run(dir,
                       "--config tiny.yaml --work_dir fresh --max_num_epochs 1 --radial_type gaussian "
                       "--distance_transform Soft");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("epoch 1"), std::string::npos) << r.out;
  const auto pot = io::read_potential_file(dir + "/fresh/tiny.safetensors");
  EXPECT_EQ(pot.meta<std::string>("/hyperparameters/radial_type"), "gaussian");
  EXPECT_EQ(pot.meta<std::string>("/hyperparameters/distance_transform"), "Soft");
  EXPECT_TRUE(pot.contains("radial_embedding.bessel_fn.gaussian_weights"));
  EXPECT_TRUE(pot.contains("radial_embedding.distance_transform.alpha"));
  EXPECT_NO_THROW((models::MaceModel<Exec, double>(pot)));

  const Result bad = run(dir, "--config tiny.yaml --work_dir bad --max_num_epochs 1 --radial_type fourier");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("chebyshev"), std::string::npos) << bad.err;
  fastmlip::io::remove_tree(dir);
}

// mace_run_train's --use_last_readout_only and --apply_cutoff (mace-torch >= 0.3.14), from the
// command line: the export has one readout, readouts.0, and the envelope off the basis; the pair
// styles' model loads it with its readout on the last layer.
TEST(TrainPotential, TrainsAFreshLastReadoutOnlyModelWithTheCutoffOnTheMessages) {
  const std::string dir = temp_dir("last_readout");
  write_dataset(dir + "/data.xyz", 8);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result r = run(dir,
                       "--config tiny.yaml --work_dir fresh --max_num_epochs 1 --use_last_readout_only true "
                       "--apply_cutoff false");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("epoch 1"), std::string::npos) << r.out;
  const auto pot = io::read_potential_file(dir + "/fresh/tiny.safetensors");
  EXPECT_TRUE(pot.meta<bool>("/hyperparameters/use_last_readout_only"));
  EXPECT_FALSE(pot.meta<bool>("/hyperparameters/apply_cutoff"));
  EXPECT_TRUE(pot.contains("readouts.0.linear_2.weight"));
  EXPECT_FALSE(pot.contains("readouts.1.linear_2.weight"));
  models::MaceModel<Exec, double> m(pot);
  EXPECT_EQ(m.num_layers(), 2);
  fastmlip::io::remove_tree(dir);
}

// MACE-MH-1's product and readout from the command line (--use_agnostic_product, --readout_bias):
// one set of contraction weights, the bias readout trained from e3nn's zero biases, loaded by the
// pair styles' model.
TEST(TrainPotential, TrainsAFreshAgnosticProductBiasReadoutModel) {
  const std::string dir = temp_dir("agnostic");
  write_dataset(dir + "/data.xyz", 8);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result r = run(dir,
                       "--config tiny.yaml --work_dir fresh --max_num_epochs 1 --use_agnostic_product true "
                       "--readout_bias true");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto pot = io::read_potential_file(dir + "/fresh/tiny.safetensors");
  EXPECT_TRUE(pot.meta<bool>("/hyperparameters/products/0/agnostic"));
  EXPECT_EQ(pot.meta<std::string>("/hyperparameters/readouts/1/class"), "NonLinearBiasReadoutBlock");
  EXPECT_EQ(pot.get("products.0.symmetric_contractions.contractions.0.weights_max").shape[0], 1);
  const auto bias = pot.get("readouts.1.linear_2.bias").as<double>(io::Conversion::widen);
  ASSERT_EQ(bias.size(), 1u);
  EXPECT_NE(bias[0], 0.0) << "the output bias is trained";
  EXPECT_NO_THROW((models::MaceModel<Exec, double>(pot)));
  fastmlip::io::remove_tree(dir);
}

// mace_run_train's --edge_irreps and --use_edge_irreps_first from the command line: each
// interaction's linear_up maps to those irreps (the first one's to their scalars), and the pair
// styles' model loads the export.
TEST(TrainPotential, TrainsAFreshEdgeIrrepsModel) {
  const std::string dir = temp_dir("edge_irreps");
  write_dataset(dir + "/data.xyz", 8);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result r = run(dir,
                       "--config tiny.yaml --work_dir fresh --max_num_epochs 1 --edge_irreps 3x0e+2x1o+2x2e "
                       "--use_edge_irreps_first true");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto pot = io::read_potential_file(dir + "/fresh/tiny.safetensors");
  EXPECT_EQ(pot.meta<std::string>("/hyperparameters/interactions/0/edge_irreps"), "3x0e");
  EXPECT_EQ(pot.meta<std::string>("/hyperparameters/interactions/1/edge_irreps"), "3x0e+2x1o+2x2e");
  models::MaceModel<Exec, double> m(pot);
  EXPECT_EQ(m.num_layers(), 2);
  const Result bad =
      run(dir, "--config tiny.yaml --work_dir bad --max_num_epochs 1 --use_edge_irreps_first true");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("use_edge_irreps_first needs edge_irreps"), std::string::npos) << bad.err;
  fastmlip::io::remove_tree(dir);
}

// A fresh model of MACE-MH-1's architecture: the non-linear block on every layer, with its
// edge_irreps, the agnostic product and the bias readout; it trains, and its export loads.
TEST(TrainPotential, TrainsAFreshNonLinearModel) {
  const std::string dir = temp_dir("nonlinear");
  write_dataset(dir + "/data.xyz", 8);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result r = run(dir,
                       "--config tiny.yaml --work_dir fresh --max_num_epochs 1 "
                       "--interaction_first RealAgnosticResidualNonLinearInteractionBlock "
                       "--interaction RealAgnosticResidualNonLinearInteractionBlock --edge_irreps 3x0e+2x1o "
                       "--use_edge_irreps_first true --use_agnostic_product true --readout_bias true "
                       "--apply_cutoff false");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto pot = io::read_potential_file(dir + "/fresh/tiny.safetensors");
  EXPECT_EQ(pot.meta<std::string>("/hyperparameters/interactions/1/class"),
            "RealAgnosticResidualNonLinearInteractionBlock");
  models::MaceModel<Exec, double> m(pot);
  EXPECT_EQ(m.num_layers(), 2);
  fastmlip::io::remove_tree(dir);
}

// mace_run_train's --embedding_specs and --use_embedding_readout for a fresh model (MACE-OMOL's
// charge / spin embeddings): a categorical charge and a continuous spin, from the command line and
// from the config file; the export is the layout the converter writes, loads with charge and spin,
// and is refused without them. A feature the model cannot embed is refused by name.
TEST(TrainPotential, TrainsAFreshChargeSpinModel) {
  const std::string dir = temp_dir("charge_spin");
  write_dataset(dir + "/data.xyz", 8);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result r =
      run(dir,
          "--config tiny.yaml --work_dir fresh --max_num_epochs 1 --embedding_specs "
          "'{total_charge: {type: categorical, per: graph, num_classes: 5, emb_dim: 4, offset: 2}, "
          "total_spin: {type: continuous, per: graph, emb_dim: 3}}' --use_embedding_readout true");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto pot = io::read_potential_file(dir + "/fresh/tiny.safetensors");
  const auto& emb = pot.metadata["hyperparameters"]["embeddings"];
  EXPECT_EQ(emb["features"][0]["name"], "total_charge");
  EXPECT_EQ(emb["features"][0]["offset"], 2);
  EXPECT_EQ(emb["features"][1]["type"], "continuous");
  EXPECT_EQ(emb["readout"], true);
  models::MaceOptions opt;
  opt.total_charge = 1.0;
  opt.total_spin = 2.0;
  EXPECT_NO_THROW((models::MaceModel<Exec, double>(pot, opt)));
  EXPECT_THROW((models::MaceModel<Exec, double>(pot)), InputError);

  // The same from the config file, as a YAML mapping.
  write_config(dir + "/emb.yaml", dir + "/data.xyz");
  std::ofstream(dir + "/emb.yaml", std::ios::app) << "embedding_specs:\n  total_spin:\n    type: continuous\n"
                                                  << "    emb_dim: 2\n";
  const Result y = run(dir, "--config emb.yaml --work_dir yaml --max_num_epochs 1");
  ASSERT_EQ(y.status, 0) << y.out << y.err;
  const auto p2 = io::read_potential_file(dir + "/yaml/tiny.safetensors");
  EXPECT_EQ(p2.metadata["hyperparameters"]["embeddings"]["features"][0]["emb_dim"], 2);
  EXPECT_EQ(p2.metadata["hyperparameters"]["embeddings"]["readout"], false);

  // Fine-tuning it on a frame whose charge the table does not hold: refused before training,
  // naming the frame.
  {
    std::string text = read_text(dir + "/data.xyz");
    text.replace(text.find("Properties="), 0, "total_charge=9 ");
    std::ofstream(dir + "/charged.xyz") << text;
  }
  const Result ft = run(dir,
                        "--name ft --train_file charged.xyz --valid_fraction 0.25 --work_dir ft "
                        "--max_num_epochs 1 --foundation_model fresh/tiny.safetensors");
  EXPECT_NE(ft.status, 0);
  EXPECT_NE(ft.err.find("charged.xyz"), std::string::npos) << ft.err;
  EXPECT_NE(ft.err.find("its total_charge 9 is not one the model embeds: it knows the integers -2 to 2"),
            std::string::npos)
      << ft.err;

  const Result bad = run(dir,
                         "--config tiny.yaml --work_dir bad --max_num_epochs 1 --embedding_specs "
                         "'{temperature: {type: continuous, emb_dim: 2}}'");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("feature 'temperature' is not supported"), std::string::npos) << bad.err;
  fastmlip::io::remove_tree(dir);
}

// Data parallel on two ranks: the run completes, rank 0 alone writes the log, CSV and export.
TEST(TrainPotential, TrainsOnTwoRanks) {
  const std::string dir = temp_dir("np2");
  write_dataset(dir + "/data.xyz", 12);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result r = run(dir, "--config tiny.yaml --work_dir np2 --max_num_epochs 2", kMpiexec + " -np 2");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("train-potential: tiny, 2 rank(s)"), std::string::npos) << r.out;
  const auto rows = csv_rows(read_text(dir + "/np2/results/tiny_train.csv"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(std::isfinite(std::stod(rows[2][2])));
  const io::PotentialFile pot = io::read_potential_file(dir + "/np2/tiny.safetensors");
  EXPECT_NO_THROW((models::MaceModel<Exec, double>(pot)));

  // A checkpoint within an epoch holds both ranks' partial sums: continuing it on 2 ranks gives
  // the uninterrupted run's CSV and export; on 1 rank it is refused.
  const Result k = run(dir,
                       "--config tiny.yaml --work_dir k --max_num_epochs 2 --checkpoint_interval 1 "
                       "--keep_checkpoints",
                       kMpiexec + " -np 2");
  ASSERT_EQ(k.status, 0) << k.out << k.err;
  const auto ck = trainer::train::read_checkpoint(dir + "/k/checkpoints/tiny_step-1.ckpt");
  ASSERT_EQ(ck.ints.count("run/epoch_steps"), 1u) << "step 1 should fall within the first epoch";
  EXPECT_EQ(ck.tensor("run/partial_train").size(0), 2);
  const Result kr =
      run(dir, "--config tiny.yaml --work_dir kr --max_num_epochs 2 --restart k/checkpoints/tiny_step-1.ckpt",
          kMpiexec + " -np 2");
  ASSERT_EQ(kr.status, 0) << kr.out << kr.err;
  EXPECT_EQ(read_text(dir + "/kr/results/tiny_train.csv"), read_text(dir + "/k/results/tiny_train.csv"));
  EXPECT_EQ(read_text(dir + "/kr/tiny.safetensors"), read_text(dir + "/k/tiny.safetensors"));
  const Result k1 = run(
      dir, "--config tiny.yaml --work_dir k1 --max_num_epochs 2 --restart k/checkpoints/tiny_step-1.ckpt");
  EXPECT_EQ(k1.status, 1);
  EXPECT_NE(k1.err.find("was written within an epoch by a run on 2 rank(s)"), std::string::npos) << k1.err;
  fastmlip::io::remove_tree(dir);
}

// The outputs of a run with config_types, kept checkpoints and a test set, then `eval`.
TEST(TrainPotential, WritesMetricsPlotBestModelTestSetAndEvaluates) {
  const std::string dir = temp_dir("outputs");
  write_dataset(dir + "/data.xyz", 12, true);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result r = run(dir,
                       "--config tiny.yaml --work_dir out --max_num_epochs 4 --keep_checkpoints "
                       "--test_file data.xyz --lr 0.05");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << "no progress bar without a terminal";
  EXPECT_NE(r.out.find("test: data.xyz, 12 configurations"), std::string::npos) << r.out;

  // JSON: four epochs with train and valid metrics per config_type; valid loss as in the CSV.
  const nlohmann::json j = nlohmann::json::parse(read_text(dir + "/out/results/tiny_train.json"));
  const auto rows = csv_rows(read_text(dir + "/out/results/tiny_train.csv"));
  ASSERT_EQ(j["epochs"].size(), 4u) << j.dump(1);
  ASSERT_EQ(rows.size(), 5u);
  int best = 0;
  double best_loss = INFINITY;
  for (int e = 1; e <= 4; ++e) {
    const auto& ep = j["epochs"][e - 1];
    EXPECT_EQ(ep["epoch"].get<int>(), e);
    const double vl = ep["valid"]["overall"]["loss"].get<double>();
    EXPECT_NEAR(vl, std::stod(rows[e][3]), 1e-9 * std::abs(vl));
    EXPECT_EQ(ep["valid"]["overall"]["configs"].get<int>(), 3);
    EXPECT_EQ(ep["train"]["overall"]["configs"].get<int>(), 9);
    const auto& types = ep["train"]["per_config_type"];
    EXPECT_EQ(types["even"]["configs"].get<int>() + types["odd"]["configs"].get<int>(), 9);
    EXPECT_TRUE(ep["valid"]["overall"]["rmse_stress"].is_null());
    if (vl < best_loss) {
      best_loss = vl;
      best = e;
    }
  }

  // The best model is the (EMA) weights validated at that epoch: that epoch's kept checkpoint.
  // (With these settings the validation loss is lowest at epoch 3 of 4, so the best model differs
  // from the final one and from the last checkpoint.)
  EXPECT_LT(best, 4);
  for (int e = 1; e <= 4; ++e) {
    EXPECT_TRUE(fs::exists(dir + "/out/checkpoints/tiny_epoch-" + std::to_string(e) + ".ckpt")) << e;
  }
  const auto ck =
      trainer::train::read_checkpoint(dir + "/out/checkpoints/tiny_epoch-" + std::to_string(best) + ".ckpt");
  EXPECT_EQ(ck.integer("run/best_epoch"), best);
  trainer::MaceTorchModel<double> best_model(io::read_potential_file(dir + "/out/tiny_best.safetensors"));
  for (const auto& [name, p] : best_model.named_parameters()) {
    EXPECT_TRUE(torch::equal(p.detach(), ck.tensor("ema/" + name))) << name << " (best epoch " << best << ")";
  }

  // The best loss survives a restart: 3 epochs, then a 4th (worse) after --restart, leave the
  // best file of epoch 3 as the straight run has it (a lost best loss would let epoch 4 replace it).
  const std::string opts = "--config tiny.yaml --work_dir rs --keep_checkpoints --lr 0.05";
  ASSERT_EQ(run(dir, opts + " --max_num_epochs 3").status, 0);
  const Result rs = run(dir, opts + " --max_num_epochs 4 --restart rs/checkpoints/tiny.ckpt");
  ASSERT_EQ(rs.status, 0) << rs.out << rs.err;
  EXPECT_EQ(read_text(dir + "/rs/tiny_best.safetensors"), read_text(dir + "/out/tiny_best.safetensors"));
  EXPECT_EQ(read_text(dir + "/rs/results/tiny_train.json"), read_text(dir + "/out/results/tiny_train.json"));

  // The learning curve: two panels, train and valid, four points each.
  const std::string svg = read_text(dir + "/out/results/tiny_learning_curve.svg");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  std::size_t pos = 0;
  int lines = 0;
  while ((pos = svg.find("points=\"", pos)) != std::string::npos) {
    const std::size_t end = svg.find('"', pos + 8);
    const std::string pts = svg.substr(pos + 8, end - pos - 8);
    EXPECT_EQ(std::count(pts.begin(), pts.end(), ','), 4) << pts;
    ++lines;
    pos = end;
  }
  EXPECT_EQ(lines, 4);

  // The test set: every frame, both types.
  const nlohmann::json t = nlohmann::json::parse(read_text(dir + "/out/results/tiny_test.json"));
  EXPECT_EQ(t["overall"]["configs"].get<int>(), 12);
  EXPECT_EQ(t["per_config_type"]["even"]["configs"].get<int>(), 6);

  // eval of the exported model on the same data gives the trainer's test metrics.
  Result ev = run(dir,
                  "eval --model out/tiny.safetensors --data data.xyz --batch_capacity 20 --output eval.json "
                  "--write_predictions pred.xyz");
  ASSERT_EQ(ev.status, 0) << ev.out << ev.err;
  EXPECT_NE(ev.out.find("even"), std::string::npos) << ev.out;
  const nlohmann::json m = nlohmann::json::parse(read_text(dir + "/eval.json"));
  for (const char* key : {"rmse_e_per_atom", "mae_e_per_atom", "rmse_f", "mae_f"}) {
    for (const auto& [set, want] : {std::pair{m["overall"], t["overall"]},
                                    std::pair{m["per_config_type"]["odd"], t["per_config_type"]["odd"]}}) {
      const double a = set[key].get<double>(), b = want[key].get<double>();
      EXPECT_NEAR(a, b, 1e-10 * std::abs(b)) << key;
    }
  }
  // ... and its predictions are the model's.
  const auto frames = io::read_extxyz(dir + "/pred.xyz");
  ASSERT_EQ(frames.size(), 12u);
  trainer::MaceTorchModel<double> model(io::read_potential_file(dir + "/out/tiny.safetensors"));
  for (std::size_t f : {std::size_t{0}, std::size_t{7}}) {
    trainer::MaceStructure ms;
    ms.positions = frames[f].positions;
    for (const auto& sym : frames[f].species) {
      ms.species.push_back(model.species_index(sym == "Ni" ? 28 : 29));
    }
    const auto out = model.forward(trainer::make_mace_batch({ms}, model.cutoff()));
    const double e = out.energy[0].item<double>();
    EXPECT_NEAR(frames[f].info_numbers("fastmlip_energy")[0], e, 1e-12 * std::abs(e)) << f;
    const auto* forces = frames[f].find_array("fastmlip_forces");
    ASSERT_NE(forces, nullptr);
    EXPECT_NEAR(forces->numbers[1], out.forces[0][1].item<double>(), 1e-12) << f;
    EXPECT_NE(frames[f].find_info("REF_energy"), nullptr);  // the labels stay for comparison
  }

  // eval's help and errors.
  ev = run(dir, "eval --help");
  EXPECT_EQ(ev.status, 0);
  EXPECT_NE(ev.out.find("--write_predictions"), std::string::npos) << ev.out;
  const auto fails = [&](const std::string& args, const std::string& message) {
    const Result f = run(dir, "eval " + args);
    EXPECT_EQ(f.status, 1) << args;
    EXPECT_NE(f.err.find(message), std::string::npos) << args << ": " << f.err;
  };
  fails("--model missing.safetensors --data data.xyz", "train-potential: error: missing.safetensors");
  fails("--model out/tiny.safetensors --data missing.xyz", "missing.xyz: cannot open the dataset");
  fails("--model out/tiny.safetensors", "train-potential: error: eval: --data is required");
  fails("--model out/tiny.safetensors --data data.xyz --bogus 1", "unknown option '--bogus'");

  // --eval_interval 3 over 4 epochs validates after epochs 3 and 4 (the last); --plot false.
  const Result iv =
      run(dir, "--config tiny.yaml --work_dir iv --max_num_epochs 4 --eval_interval 3 --plot false");
  ASSERT_EQ(iv.status, 0) << iv.out << iv.err;
  EXPECT_NE(iv.out.find("epoch 1/4: lr 1.000e-02, train loss"), std::string::npos) << iv.out;
  EXPECT_NE(iv.out.find("(not validated this epoch)"), std::string::npos) << iv.out;
  const auto iv_rows = csv_rows(read_text(dir + "/iv/results/tiny_train.csv"));
  ASSERT_EQ(iv_rows.size(), 5u);
  EXPECT_EQ(iv_rows[1][3], "");
  EXPECT_EQ(iv_rows[2][3], "");
  EXPECT_NE(iv_rows[3][3], "");
  EXPECT_NE(iv_rows[4][3], "");
  EXPECT_FALSE(fs::exists(dir + "/iv/results/tiny_learning_curve.svg"));
  EXPECT_FALSE(fs::exists(dir + "/iv/checkpoints/tiny_epoch-1.ckpt"));
  fastmlip::io::remove_tree(dir);
}

// --compute_stress: stress metrics with the weighted loss, in the epoch JSON, the CSV, the test
// set and eval (which predicts stress whenever the data has stress labels).
TEST(TrainPotential, StressMetricsWithComputeStress) {
  const std::string dir = temp_dir("stress");
  write_dataset(dir + "/data.xyz", 12, false, true);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result r =
      run(dir, "--config tiny.yaml --work_dir out --max_num_epochs 1 --compute_stress --test_file data.xyz");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("RMSE S "), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_text(dir + "/out/results/tiny_train.json"));
  const auto& valid = j["epochs"][0]["valid"]["overall"];
  EXPECT_EQ(valid["n_stress_components"].get<int>(), 9 * 3);
  EXPECT_GT(valid["rmse_stress"].get<double>(), 0.0);
  EXPECT_TRUE(valid["rmse_virials_per_atom"].is_null());  // no virial labels
  const auto rows = csv_rows(read_text(dir + "/out/results/tiny_train.csv"));
  ASSERT_GE(rows[1].size(), 10u);
  EXPECT_NEAR(std::stod(rows[1][8]), valid["rmse_stress"].get<double>(), 1e-9 * std::stod(rows[1][8]));
  const nlohmann::json t = nlohmann::json::parse(read_text(dir + "/out/results/tiny_test.json"));
  const Result ev = run(dir, "eval --model out/tiny.safetensors --data data.xyz --output eval.json");
  ASSERT_EQ(ev.status, 0) << ev.out << ev.err;
  const nlohmann::json m = nlohmann::json::parse(read_text(dir + "/eval.json"));
  const double want = t["overall"]["rmse_stress"].get<double>();
  EXPECT_NEAR(m["overall"]["rmse_stress"].get<double>(), want, 1e-10 * want);
  EXPECT_EQ(m["overall"]["n_stress_components"].get<int>(), 9 * 12);
  fastmlip::io::remove_tree(dir);
}

// --checkpoint_interval 2: checkpoints within an epoch (kept as NAME_step-S.ckpt); restarting
// from one continues exactly: the same CSV, JSON, best and final files as the uninterrupted run,
// which itself equals a run without intermediate checkpoints.
TEST(TrainPotential, CheckpointWithinAnEpochRestartsExactly) {
  const std::string dir = temp_dir("midepoch");
  write_dataset(dir + "/data.xyz", 12);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result a = run(dir,
                       "--config tiny.yaml --work_dir a --max_num_epochs 2 --checkpoint_interval 2 "
                       "--keep_checkpoints");
  ASSERT_EQ(a.status, 0) << a.out << a.err;
  const Result c = run(dir, "--config tiny.yaml --work_dir c --max_num_epochs 2");
  ASSERT_EQ(c.status, 0) << c.out << c.err;
  const auto ck = trainer::train::read_checkpoint(dir + "/a/checkpoints/tiny_step-2.ckpt");
  ASSERT_EQ(ck.ints.count("run/epoch_steps"), 1u) << "step 2 should fall within the first epoch";
  EXPECT_EQ(ck.integer("run/epoch_steps"), 2);
  EXPECT_EQ(ck.integer("counters/epochs"), 0);

  const Result b = run(dir,
                       "--config tiny.yaml --work_dir b --max_num_epochs 2 --checkpoint_interval 2 "
                       "--restart a/checkpoints/tiny_step-2.ckpt");
  ASSERT_EQ(b.status, 0) << b.out << b.err;
  EXPECT_NE(b.out.find("restart: a/checkpoints/tiny_step-2.ckpt after epoch 0 and 2 step(s) of the next"),
            std::string::npos)
      << b.out;
  for (const char* f :
       {"results/tiny_train.csv", "results/tiny_train.json", "tiny.safetensors", "tiny_best.safetensors"}) {
    const std::string want = read_text(dir + "/a/" + f);
    EXPECT_FALSE(want.empty()) << f;
    EXPECT_EQ(read_text(dir + "/b/" + f), want) << f;
    EXPECT_EQ(read_text(dir + "/c/" + f), want) << f;
  }
  const auto sa = trainer::train::read_checkpoint(dir + "/a/checkpoints/tiny.ckpt");
  const auto sb = trainer::train::read_checkpoint(dir + "/b/checkpoints/tiny.ckpt");
  for (const auto& [k, t] : sa.tensors) {
    EXPECT_TRUE(torch::equal(t, sb.tensor(k))) << k;
  }
  EXPECT_EQ(sa.ints, sb.ints);

  // With --accumulate_bins 2 the checkpoint counts optimiser steps of two bins each; it continues
  // exactly with the same --accumulate_bins and is refused with another.
  const std::string acc = "--config tiny.yaml --max_num_epochs 2 --accumulate_bins 2 --checkpoint_interval 1";
  const Result d = run(dir, acc + " --work_dir d --keep_checkpoints");
  ASSERT_EQ(d.status, 0) << d.out << d.err;
  const auto cd = trainer::train::read_checkpoint(dir + "/d/checkpoints/tiny_step-1.ckpt");
  ASSERT_EQ(cd.ints.count("run/epoch_steps"), 1u) << "step 1 should fall within the first epoch";
  const Result e = run(dir, acc + " --work_dir e --restart d/checkpoints/tiny_step-1.ckpt");
  ASSERT_EQ(e.status, 0) << e.out << e.err;
  EXPECT_EQ(read_text(dir + "/e/results/tiny_train.csv"), read_text(dir + "/d/results/tiny_train.csv"));
  EXPECT_EQ(read_text(dir + "/e/tiny.safetensors"), read_text(dir + "/d/tiny.safetensors"));
  const Result f =
      run(dir, "--config tiny.yaml --max_num_epochs 2 --work_dir f --restart d/checkpoints/tiny_step-1.ckpt");
  EXPECT_EQ(f.status, 1);
  EXPECT_NE(f.err.find("with --accumulate_bins 2; continue it the same way"), std::string::npos) << f.err;
  fastmlip::io::remove_tree(dir);
}

// Regression: a rank whose validation bin is empty (one validation configuration, two ranks)
// skipped the graph-count all-reduce the other rank made, and the job died in MPI_ERR_TRUNCATE.
TEST(TrainPotential, TwoRanksWithAnEmptyValidationBin) {
  const std::string dir = temp_dir("emptyvalid");
  write_dataset(dir + "/data.xyz", 12);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result r = run(dir, "--config tiny.yaml --work_dir w --max_num_epochs 2 --valid_fraction 0.1",
                       kMpiexec + " -np 2");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 validation configurations"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("epoch 2/2"), std::string::npos) << r.out;
  fastmlip::io::remove_tree(dir);
}

/// The largest difference between two checkpoints' tensors relative to the tensor's largest
/// magnitude (at least 1), over every tensor; the key sets must match.
double max_relative_difference(const trainer::train::CheckpointState& a,
                               const trainer::train::CheckpointState& b, std::string* worst) {
  EXPECT_EQ(a.tensors.size(), b.tensors.size());
  double out = 0;
  for (const auto& [k, t] : a.tensors) {
    if (b.tensors.count(k) == 0) {
      ADD_FAILURE() << k << " missing";
      continue;
    }
    const auto x = t.to(torch::kFloat64), y = b.tensors.at(k).to(torch::kFloat64);
    if (x.numel() == 0) {
      continue;
    }
    const double scale = std::max(1.0, x.abs().max().item<double>());
    const double d = (x - y).abs().max().item<double>() / scale;
    if (d >= out) {
      out = d;
      *worst = k;
    }
  }
  return out;
}

// The same global batches on any rank count: a global step is ranks x --accumulate_bins bins,
// so one rank accumulating two bins and two ranks with one bin each train on the same batches
// (a plan that depended on the world size would fail this by far more than round-off). Two
// epochs with the cosine schedule (the plateau schedule would act on validation losses, which
// are means over differently batched validation sets). Parameters, Adam moments and EMA agree
// to round-off; the other runs change only how the work is done and agree bitwise: the
// all-reduce overlapped with backward or after it, graphs prefetched or built in the step.
TEST(TrainPotential, SameGlobalBatchesOnOneAndTwoRanks) {
  const std::string dir = temp_dir("global");
  write_dataset(dir + "/data.xyz", 16);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const std::string common = "--config tiny.yaml --max_num_epochs 2 --scheduler CosineAnnealingLR";
  const Result one = run(dir, common + " --work_dir one --accumulate_bins 2 --prefetch 0");
  ASSERT_EQ(one.status, 0) << one.out << one.err;
  const Result one_prefetch = run(dir, common + " --work_dir one_prefetch --accumulate_bins 2 --prefetch 2");
  ASSERT_EQ(one_prefetch.status, 0) << one_prefetch.out << one_prefetch.err;
  const Result two = run(dir, common + " --work_dir two", kMpiexec + " -np 2");
  ASSERT_EQ(two.status, 0) << two.out << two.err;
  const Result two_blocking =
      run(dir, common + " --work_dir two_blocking --overlap_allreduce false", kMpiexec + " -np 2");
  ASSERT_EQ(two_blocking.status, 0) << two_blocking.out << two_blocking.err;

  const auto s1 = trainer::train::read_checkpoint(dir + "/one/checkpoints/tiny.ckpt");
  const auto s2 = trainer::train::read_checkpoint(dir + "/two/checkpoints/tiny.ckpt");
  // Several steps per epoch, or the test would not compare accumulation across steps.
  EXPECT_GE(s1.ints.at("counters/steps"), 4);
  EXPECT_EQ(s1.ints.at("counters/steps"), s2.ints.at("counters/steps"));
  std::string worst;
  const double d = max_relative_difference(s1, s2, &worst);
  EXPECT_LT(d, 1e-12) << "worst tensor " << worst;
  // Other global batches (one bin per step) land far from it: the tolerance discriminates.
  const Result small = run(dir, common + " --work_dir small");
  ASSERT_EQ(small.status, 0) << small.out << small.err;
  EXPECT_GT(max_relative_difference(s1, trainer::train::read_checkpoint(dir + "/small/checkpoints/tiny.ckpt"),
                                    &worst),
            1e-6);

  for (const std::string other : {"one_prefetch", "two_blocking"}) {
    EXPECT_EQ(read_text(dir + "/" + other + "/tiny.safetensors"),
              read_text(dir + "/" + (other == "one_prefetch" ? "one" : "two") + "/tiny.safetensors"))
        << other;
  }
  EXPECT_EQ(read_text(dir + "/one_prefetch/results/tiny_train.csv"),
            read_text(dir + "/one/results/tiny_train.csv"));
  fastmlip::io::remove_tree(dir);
}

// `train-potential preprocess` (issue 22): the same run from the extended XYZ files and from the
// preprocessed datasets trains the same model bit for bit, on 1 rank and on 2 (a dataset written
// by 2 ranks, 2 shards); an existing dataset is never overwritten; what an interrupted run left
// is replaced; a run with other data options is refused; a damaged dataset names the file.
TEST(TrainPotential, PreprocessedDatasetsTrainBitwiseAsTheFiles) {
  const std::string dir = temp_dir("preprocess");
  write_dataset(dir + "/data.xyz", 12, /*typed=*/true);
  write_dataset(dir + "/test.xyz", 5);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const Result p1 = run(dir, "preprocess --config tiny.yaml --test_file test.xyz --output pre");
  ASSERT_EQ(p1.status, 0) << p1.out << p1.err;
  EXPECT_NE(p1.out.find("-> pre/train: 12 graphs"), std::string::npos) << p1.out;
  EXPECT_NE(p1.out.find("-> pre/test: 5 graphs"), std::string::npos) << p1.out;
  EXPECT_FALSE(fs::exists(dir + "/pre/train.partial"));
  // A stale partial directory (an interrupted run) is replaced; the result is a dataset.
  fs::create_directories(dir + "/pre2/train.partial");
  { std::ofstream(dir + "/pre2/train.partial/shard-00000.mdb") << "half-written"; }
  const Result p2 =
      run(dir, "preprocess --config tiny.yaml --test_file test.xyz --output pre2", kMpiexec + " -np 2");
  ASSERT_EQ(p2.status, 0) << p2.out << p2.err;
  EXPECT_TRUE(fs::exists(dir + "/pre2/train/shard-00001.mdb"));
  EXPECT_FALSE(fs::exists(dir + "/pre2/train.partial"));

  const std::string common = "--config tiny.yaml --max_num_epochs 2";
  const std::string files = " --test_file test.xyz", stored = " --train_file pre/train --test_file pre/test";
  struct Pair {
    std::string a, b, launcher;
  };
  for (const Pair& p : {Pair{"file1", "pre1", ""}, Pair{"file2", "pre2", kMpiexec + " -np 2"}}) {
    SCOPED_TRACE(p.a);
    const Result a = run(dir, common + files + " --work_dir " + p.a, p.launcher);
    ASSERT_EQ(a.status, 0) << a.out << a.err;
    const std::string src = p.b == "pre1" ? stored : " --train_file pre2/train --test_file pre2/test";
    const Result b = run(dir, common + src + " --work_dir " + p.b, p.launcher);
    ASSERT_EQ(b.status, 0) << b.out << b.err;
    EXPECT_EQ(read_text(dir + "/" + p.a + "/tiny.safetensors"),
              read_text(dir + "/" + p.b + "/tiny.safetensors"));
    EXPECT_EQ(read_text(dir + "/" + p.a + "/results/tiny_train.csv"),
              read_text(dir + "/" + p.b + "/results/tiny_train.csv"));
    EXPECT_TRUE(fs::exists(dir + "/" + p.b + "/results/tiny_test.json"));
    // Streaming: one rank reads every training and validation graph once an epoch and the test
    // graphs once; of two ranks, rank 0 reads only its own bins and batches, fewer.
    int train_n = 0, valid_n = 0, test_n = 0;
    ASSERT_EQ(std::sscanf(b.out.substr(b.out.find("data: ")).c_str(),
                          "data: %d training and %d validation configurations, %d test", &train_n, &valid_n,
                          &test_n),
              3)
        << b.out;
    const auto read_at = b.out.find("data: rank 0 read ");
    ASSERT_NE(read_at, std::string::npos) << b.out;
    const long records = std::stol(b.out.substr(read_at + 18));
    const long everything = 2L * (train_n + valid_n) + test_n;  // 2 epochs, validated each
    if (p.launcher.empty()) {
      EXPECT_EQ(records, everything) << b.out;
    } else {
      EXPECT_GT(records, 0) << b.out;
      EXPECT_LT(records, everything) << b.out;
    }
    EXPECT_EQ(a.out.find("data: rank 0 read "), std::string::npos) << a.out;  // files are not streamed
    const auto sa = trainer::train::read_checkpoint(dir + "/" + p.a + "/checkpoints/tiny.ckpt");
    const auto sb = trainer::train::read_checkpoint(dir + "/" + p.b + "/checkpoints/tiny.ckpt");
    for (const auto& [k, t] : sa.tensors) {
      ASSERT_EQ(sb.tensors.count(k), 1u) << k;
      EXPECT_TRUE(torch::equal(t, sb.tensors.at(k))) << k;
    }
  }

  // From the dataset, the guarantees hold as from the file: --accumulate_bins 2 trains as from
  // the file with it, bitwise; a restart within an epoch (after step 1 of --checkpoint_interval
  // 1) continues to the straight run's model, bitwise.
  const Result acc_file = run(dir, common + files + " --accumulate_bins 2 --work_dir acc_file");
  const Result acc_pre = run(dir, common + stored + " --accumulate_bins 2 --work_dir acc_pre");
  ASSERT_EQ(acc_file.status, 0) << acc_file.out << acc_file.err;
  ASSERT_EQ(acc_pre.status, 0) << acc_pre.out << acc_pre.err;
  EXPECT_EQ(read_text(dir + "/acc_file/tiny.safetensors"), read_text(dir + "/acc_pre/tiny.safetensors"));
  const Result steps =
      run(dir, common + stored + " --checkpoint_interval 1 --keep_checkpoints --work_dir steps");
  ASSERT_EQ(steps.status, 0) << steps.out << steps.err;
  const Result resumed =
      run(dir, common + stored + " --work_dir resumed --restart steps/checkpoints/tiny_step-1.ckpt");
  ASSERT_EQ(resumed.status, 0) << resumed.out << resumed.err;
  EXPECT_EQ(read_text(dir + "/steps/tiny.safetensors"), read_text(dir + "/resumed/tiny.safetensors"));
  EXPECT_EQ(read_text(dir + "/pre1/tiny.safetensors"), read_text(dir + "/resumed/tiny.safetensors"));

  // Refusals: an existing dataset, other data options, a damaged record.
  const Result again = run(dir, "preprocess --config tiny.yaml --output pre");
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.err.find("pre/train: already exists"), std::string::npos) << again.err;
  const Result keys = run(dir, common + stored + " --work_dir keys --energy_key other_energy");
  EXPECT_EQ(keys.status, 1);
  EXPECT_NE(keys.err.find("energy_key \"REF_energy\" there, \"other_energy\" here"), std::string::npos)
      << keys.err;
  const std::string shard = dir + "/pre/train/shard-00000.mdb";
  std::string bytes = read_text(shard);
  // Each record names its source file; LMDB leaves stale copies in free page space, so every
  // occurrence is damaged (each record read fails then, the first one read stops the run).
  int flipped = 0;
  for (auto at = bytes.find("data.xyz"); at != std::string::npos; at = bytes.find("data.xyz", at + 1)) {
    bytes[at] ^= 0x20;
    ++flipped;
  }
  ASSERT_GE(flipped, 9);
  { std::ofstream(shard, std::ios::binary | std::ios::trunc) << bytes; }
  const Result damaged = run(dir, common + stored + " --work_dir damaged");
  EXPECT_EQ(damaged.status, 1);
  EXPECT_NE(damaged.err.find("pre/train/shard-00000.mdb (graph "), std::string::npos) << damaged.err;
  EXPECT_NE(damaged.err.find("checksum"), std::string::npos) << damaged.err;
  const Result help = run(dir, "preprocess --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("Usage: train-potential preprocess --output DIR"), std::string::npos) << help.out;
  fastmlip::io::remove_tree(dir);
}

/// The process id of rank `rank` of a train-potential running in directory `dir` (its
/// environment names the rank, as Open MPI and MPICH launchers set it); -1 if none.
pid_t find_rank(const std::string& dir, int rank) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const std::string cmdline = read_text(entry.path().string() + "/cmdline");
    std::error_code ec;
    if (cmdline.rfind(kExe + '\0', 0) != 0 || fs::read_symlink(entry.path() / "cwd", ec) != fs::path(dir)) {
      continue;
    }
    const std::string env = '\0' + read_text(entry.path().string() + "/environ");
    const std::string r = std::to_string(rank) + '\0';
    if (env.find(std::string("\0OMPI_COMM_WORLD_RANK=") + r) != std::string::npos ||
        env.find(std::string("\0PMI_RANK=") + r) != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

// A rank that dies: SIGKILL to rank 1 after the first checkpoint. The launcher must end the
// whole job (no rank left waiting in a collective) with a non-zero status and a message that
// names the killed process; the checkpoint, written atomically by rank 0, must be whole and must
// restart on a single rank.
TEST(TrainPotential, KilledRankEndsTheJobAndTheCheckpointRestarts) {
  const std::string dir = temp_dir("kill");
  write_dataset(dir + "/data.xyz", 12);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const std::string ckpt = dir + "/killed/checkpoints/tiny.ckpt";
  const std::string cmd =
      "cd '" + dir + "' && OMP_NUM_THREADS=1 exec " + kMpiexec + " -np 2 '" + kExe +
      "' --config tiny.yaml --work_dir killed --max_num_epochs 100000 > out.txt 2> err.txt";
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    setpgid(0, 0);  // its own group, so that a hung job can be cleaned up as a whole
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(launcher, launcher);
  const auto deadline = [](int seconds) {
    return std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  };
  auto until = deadline(60);
  while (!fs::exists(ckpt) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const pid_t victim = find_rank(dir, 1);
  int status = 0;
  bool ended = false;
  if (fs::exists(ckpt) && victim > 0) {
    EXPECT_EQ(kill(victim, SIGKILL), 0);
    until = deadline(60);
    while (!ended && std::chrono::steady_clock::now() < until) {
      ended = waitpid(launcher, &status, WNOHANG) == launcher;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (!ended) {
    kill(-launcher, SIGKILL);
    waitpid(launcher, &status, 0);
  }
  ASSERT_TRUE(fs::exists(ckpt)) << "no checkpoint within 60 s: " << read_text(dir + "/err.txt");
  ASSERT_GT(victim, 0) << "rank 1 of the job was not found in /proc";
  ASSERT_TRUE(ended) << "the job hung for 60 s after rank 1 was killed";
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string message = read_text(dir + "/err.txt") + read_text(dir + "/out.txt");
  std::transform(message.begin(), message.end(), message.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  EXPECT_NE(message.find("killed"), std::string::npos) << message;

  // Whole (the checksum is checked on reading), and it continues on one rank.
  trainer::train::CheckpointState s;
  ASSERT_NO_THROW(s = trainer::train::read_checkpoint(ckpt));
  const std::int64_t epochs = s.ints.at("counters/epochs");
  EXPECT_GE(epochs, 1);
  const Result r = run(dir, "--config tiny.yaml --work_dir killed --max_num_epochs " +
                                std::to_string(epochs + 1) + " --restart killed/checkpoints/tiny.ckpt");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("restart: killed/checkpoints/tiny.ckpt after epoch " + std::to_string(epochs)),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(dir + "/killed/tiny.safetensors"));
  fastmlip::io::remove_tree(dir);
}


// The other losses and float32 in the executable, and --valid_file. Each loss trains three
// epochs on periodic frames with stress and virial labels, the stress or virial term weighted to
// a sizeable part of the loss (the stresses of these sparse cells are ~1e-3 eV/A^3): the training
// loss must fall (a term with a wrong gradient makes it rise) and the term must count (the same
// run with its weight 0 reports another loss). float32: the run says so, the
// export records it, and its model agrees with the same weights in float64 to float precision.
TEST(TrainPotential, StressVirialsHuberLossesFloat32AndValidFile) {
  const std::string dir = temp_dir("losses");
  write_dataset(dir + "/data.xyz", 12, false, true, true);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const auto losses = [&](const std::string& work) {
    const auto rows = csv_rows(read_text(dir + "/" + work + "/results/tiny_train.csv"));
    std::vector<double> out;
    for (std::size_t e = 1; e < rows.size(); ++e) {
      out.push_back(std::stod(rows[e][2]));
    }
    return out;
  };
  for (const std::string loss : {"stress", "virials", "huber"}) {
    SCOPED_TRACE(loss);
    const std::string args =
        "--config tiny.yaml --loss " + loss + " --ema false --stress_weight 1e5 --virials_weight 1 ";
    const Result r = run(dir, args + "--work_dir " + loss + " --max_num_epochs 3");
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    const std::vector<double> l = losses(loss);
    ASSERT_EQ(l.size(), 3u);
    for (double v : l) {
      EXPECT_TRUE(std::isfinite(v));
    }
    EXPECT_LT(l[2], l[0]);
    const std::string weight = loss == "virials" ? "--virials_weight" : "--stress_weight";
    const Result z = run(dir, args + "--work_dir " + loss + "0 --max_num_epochs 1 " + weight + " 0");
    ASSERT_EQ(z.status, 0) << z.out << z.err;
    EXPECT_NE(losses(loss + "0")[0], l[0]) << "the " << loss << " term does not count";
  }

  write_dataset(dir + "/valid.xyz", 5, false, true);
  const Result f = run(dir, "--config tiny.yaml --work_dir f32 --max_num_epochs 2 --default_dtype float32 "
                            "--valid_file valid.xyz");
  ASSERT_EQ(f.status, 0) << f.out << f.err;
  EXPECT_NE(f.out.find("1 rank(s), float32"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("data: 12 training and 5 validation configurations"), std::string::npos) << f.out;
  const std::vector<double> l = losses("f32");
  ASSERT_EQ(l.size(), 2u);
  EXPECT_TRUE(std::isfinite(l[0]) && std::isfinite(l[1]));
  const io::PotentialFile pot = io::read_potential_file(dir + "/f32/tiny.safetensors");
  EXPECT_EQ(pot.metadata.at("dtype").get<std::string>(), "float32");
  trainer::MaceTorchModel<float> m32(pot);
  trainer::MaceTorchModel<double> m64(pot);
  const Structure s = random_structure(5, 3.0, 1.6, static_cast<int>(m32.species().size()), 12, true);
  const auto o32 = m32.forward(trainer::make_mace_batch({mace_structure(s)}, m32.cutoff()));
  const auto o64 = m64.forward(trainer::make_mace_batch({mace_structure(s)}, m64.cutoff()));
  const double e64 = o64.energy[0].item<double>();
  EXPECT_NEAR(o32.energy[0].item<double>(), e64, 1e-5 * std::max(1.0, std::abs(e64)));
  EXPECT_TRUE(torch::allclose(o32.forces.to(torch::kFloat64), o64.forces, 1e-4, 1e-4));
  fastmlip::io::remove_tree(dir);
}

// CHGNet fine-tuning from the MPtrj JSON fixture (3 frames of 2-4 atoms; two with magmoms).
const std::string kChgnet = kReferenceData + "/../../../potentials/chgnet-0.3.0.safetensors";
const std::string kMptrj = kReferenceData + "/trainer/mptrj_small.json";

/// Two atoms of atomic numbers za, zb in a small triclinic cell.
ChgnetStructure chgnet_pair(int za, int zb) {
  ChgnetStructure s;
  s.lattice = {3.0, 0.1, 0.0, 0.0, 2.9, 0.2, 0.1, 0.0, 3.1};
  s.positions = {0.0, 0.0, 0.0, 1.4, 1.5, 1.6};
  s.numbers = {za, zb};
  return s;
}

/// The core ChgnetModel (the pair style's) and the trainer's model give one energy for `s` from
/// the potential file, to 1e-10 relative; returns the trainer's.
double expect_core_energy_equals_trainer(const io::PotentialFile& pot, const ChgnetStructure& s) {
  trainer::ChgnetTorchModel<double> model(pot);
  models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> core(pot);
  const auto out = model.forward(trainer::make_chgnet_batch({{s.positions, s.numbers, s.lattice, s.pbc}},
                                                            model.cutoff(), model.bond_cutoff()));
  const double e = out.energy[0].item<double>();
  EXPECT_NEAR(evaluate(core, s).energy, e, 1e-10 * std::max(1.0, std::abs(e)));
  return e;
}

std::string chgnet_args(const std::string& work) {
  return "--model chgnet --foundation_model '" + kChgnet + "' --train_file '" + kMptrj + "' --valid_file '" +
         kMptrj + "' --batch_capacity 4 --name c --work_dir " + work;
}

TEST(TrainPotential, FineTunesChgnetFromMptrjJson) {
  const std::string dir = temp_dir("chgnet");
  const Result a = run(dir, chgnet_args("straight") + " --max_num_epochs 2 --test_file '" + kMptrj + "'");
  ASSERT_EQ(a.status, 0) << a.out << a.err;
  EXPECT_NE(a.out.find("data: 3 training and 3 validation configurations"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("model: fine-tuning"), std::string::npos) << a.out;
  const auto rows = csv_rows(read_text(dir + "/straight/results/c_train.csv"));
  ASSERT_EQ(rows.size(), 3u);
  for (int e = 1; e <= 2; ++e) {
    EXPECT_TRUE(std::isfinite(std::stod(rows[e][2]))) << e;
    EXPECT_TRUE(std::isfinite(std::stod(rows[e][3]))) << e;
  }
  EXPECT_TRUE(fs::exists(dir + "/straight/results/c_test.json"));
  // Magmom metrics (two of the three frames have magmoms: 6 atoms): CSV columns, JSON, log.
  ASSERT_EQ(rows[0].size(), 14u);
  EXPECT_EQ(rows[0][12], "rmse_magmom");
  EXPECT_GT(std::stod(rows[2][12]), 0.0);
  EXPECT_GE(std::stod(rows[2][12]), std::stod(rows[2][13]));  // RMSE >= MAE
  const auto train_json = nlohmann::json::parse(read_text(dir + "/straight/results/c_train.json"));
  const auto& valid = train_json.at("epochs").at(1).at("valid").at("overall");
  EXPECT_EQ(valid.at("n_magmoms").get<int>(), 6);
  EXPECT_NEAR(valid.at("rmse_magmom").get<double>(), std::stod(rows[2][12]), 1e-9);
  EXPECT_NE(a.out.find(" mu_B, MAE M "), std::string::npos) << a.out;
  const auto test_json = nlohmann::json::parse(read_text(dir + "/straight/results/c_test.json"));
  EXPECT_EQ(test_json.at("overall").at("n_magmoms").get<int>(), 6);

  // eval of the exported CHGNet file on the same JSON gives the run's test metrics; predictions
  // are written as extended XYZ, so JSON data is refused for them.
  const Result ev = run(dir, "eval --model straight/c.safetensors --data '" + kMptrj + "' --output ev.json");
  ASSERT_EQ(ev.status, 0) << ev.out << ev.err;
  const auto ev_json = nlohmann::json::parse(read_text(dir + "/ev.json"));
  for (const char* key : {"rmse_e_per_atom", "rmse_f", "rmse_magmom"}) {
    const double want = test_json.at("overall").at(key).get<double>();
    EXPECT_GT(want, 0.0) << key;
    EXPECT_NEAR(ev_json.at("overall").at(key).get<double>(), want, 1e-10 * want) << key;
  }
  const Result evp = run(dir, "eval --model straight/c.safetensors --data '" + kMptrj +
                                  "' --write_predictions p.xyz");
  EXPECT_EQ(evp.status, 1);
  EXPECT_NE(evp.err.find("is JSON; evaluate an extended XYZ file"), std::string::npos) << evp.err;

  // 1 epoch, then a restart to 2: the straight run's export, bit for bit.
  const Result b1 = run(dir, chgnet_args("split") + " --max_num_epochs 1");
  ASSERT_EQ(b1.status, 0) << b1.out << b1.err;
  const Result b2 = run(dir, chgnet_args("split") + " --max_num_epochs 2 --restart split/checkpoints/c.ckpt");
  ASSERT_EQ(b2.status, 0) << b2.out << b2.err;
  EXPECT_EQ(read_text(dir + "/split/c.safetensors"), read_text(dir + "/straight/c.safetensors"));
  EXPECT_EQ(read_text(dir + "/split/results/c_train.csv"), read_text(dir + "/straight/results/c_train.csv"));

  // The export: the core ChgnetModel (the pair style's) gives the trainer model's energy.
  const io::PotentialFile pot = io::read_potential_file(dir + "/straight/c.safetensors");
  const ChgnetStructure s = chgnet_pair(26, 27);
  const double e_trainer = expect_core_energy_equals_trainer(pot, s);
  // Fine-tuning moved the weights: the shipped model gives another energy.
  models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> shipped(io::read_potential_file(kChgnet));
  EXPECT_GT(std::abs(evaluate(shipped, s).energy - e_trainer), 1e-8);

  // Two ranks.
  const Result np2 = run(dir, chgnet_args("np2") + " --max_num_epochs 1", kMpiexec + " -np 2");
  ASSERT_EQ(np2.status, 0) << np2.out << np2.err;
  EXPECT_NE(np2.out.find("2 rank(s)"), std::string::npos) << np2.out;
  EXPECT_TRUE(std::isfinite(std::stod(csv_rows(read_text(dir + "/np2/results/c_train.csv"))[1][2])));

  // The JSON preprocessed on 2 ranks (each parses the document one frame at a time and converts
  // its own frames): training from the datasets gives the straight run's export, CSV (with the
  // magmom columns, from the index's label flags) and test metrics, bit for bit.
  const Result pre = run(dir,
                         "preprocess --model chgnet --train_file '" + kMptrj + "' --valid_file '" + kMptrj +
                             "' --test_file '" + kMptrj + "' --output pre",
                         kMpiexec + " -np 2");
  ASSERT_EQ(pre.status, 0) << pre.out << pre.err;
  const Result fromdata = run(dir, "--model chgnet --foundation_model '" + kChgnet +
                                       "' --train_file pre/train --valid_file pre/valid --test_file pre/test "
                                       "--batch_capacity 4 --name c --work_dir fromdata --max_num_epochs 2");
  ASSERT_EQ(fromdata.status, 0) << fromdata.out << fromdata.err;
  EXPECT_EQ(read_text(dir + "/fromdata/c.safetensors"), read_text(dir + "/straight/c.safetensors"));
  EXPECT_EQ(read_text(dir + "/fromdata/results/c_train.csv"),
            read_text(dir + "/straight/results/c_train.csv"));
  EXPECT_EQ(nlohmann::json::parse(read_text(dir + "/fromdata/results/c_test.json")).at("overall"),
            test_json.at("overall"));

  // Direct heads: trained, exported with the rest, and read back by the trainer's model.
  const Result dh = run(dir, chgnet_args("dh") + " --max_num_epochs 1 --direct_heads");
  ASSERT_EQ(dh.status, 0) << dh.out << dh.err;
  const io::PotentialFile dpot = io::read_potential_file(dir + "/dh/c.safetensors");
  EXPECT_TRUE(dpot.contains("force_head.layers.0.weight"));
  EXPECT_TRUE(dpot.contains("stress_head.layers.2.weight"));
  const trainer::ChgnetTorchModel<double> dmodel(dpot, {true});
  const trainer::ChgnetTorchModel<double> plain(pot);
  EXPECT_EQ(dmodel.named_parameters().size(), plain.named_parameters().size() + 8);
  EXPECT_NO_THROW((models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double>(dpot)));
  fastmlip::io::remove_tree(dir);
}

// A fresh CHGNet (no --foundation_model): chgnet 0.3.0's architecture from make_chgnet_potential,
// its AtomRef from the least-squares E0s; two epochs train, and the export is what the core
// ChgnetModel (the pair style's) evaluates as the trainer does.
TEST(TrainPotential, TrainsAFreshChgnet) {
  const std::string dir = temp_dir("chgnet_fresh");
  const std::string args = "--model chgnet --train_file '" + kMptrj + "' --valid_file '" + kMptrj +
                           "' --E0s average --batch_capacity 4 --name f --seed 7 --max_num_epochs 2 "
                           "--work_dir ";
  const Result r = run(dir, args + "a");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("model: fresh CHGNet (chgnet 0.3.0 architecture), elements"), std::string::npos)
      << r.out;
  const auto rows = csv_rows(read_text(dir + "/a/results/f_train.csv"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(std::isfinite(std::stod(rows[1][2])) && std::isfinite(std::stod(rows[2][2])));
  const io::PotentialFile pot = io::read_potential_file(dir + "/a/f.safetensors");
  EXPECT_EQ(pot.metadata.at("hyperparameters").at("n_conv").get<int>(), 4);
  expect_core_energy_equals_trainer(pot, chgnet_pair(3, 8));
  // The same seed gives the same run; the fresh weights are the seed's.
  const Result again = run(dir, args + "b");
  ASSERT_EQ(again.status, 0) << again.out << again.err;
  EXPECT_EQ(read_text(dir + "/a/f.safetensors"), read_text(dir + "/b/f.safetensors"));
  fastmlip::io::remove_tree(dir);
}

TEST(TrainPotential, ChgnetRefusals) {
  const std::string dir = temp_dir("chgnet_bad");
  const Result mace_opt = run(dir, chgnet_args("x") + " --num_channels 8 --r_max 4.0");
  EXPECT_EQ(mace_opt.status, 1);
  EXPECT_NE(mace_opt.err.find("'num_channels'"), std::string::npos) << mace_opt.err;
  EXPECT_NE(mace_opt.err.find("'r_max'"), std::string::npos) << mace_opt.err;
  const Result heads = run(dir, "--name h --train_file '" + kMptrj + "' --direct_heads");
  EXPECT_EQ(heads.status, 1);
  EXPECT_NE(heads.err.find("use them with --model chgnet"), std::string::npos) << heads.err;
  // An element beyond the model's embedding: the frame and the atom are named.
  std::ofstream(dir + "/og.xyz") << "2\nProperties=species:S:1:pos:R:3:forces:R:3 energy=-1.0 pbc=\"F F F\"\n"
                                     "Fe 0 0 0 0 0 0\nOg 2 0 0 0 0 0\n";
  const Result og = run(dir, "--name og --model chgnet --foundation_model '" + kChgnet +
                                 "' --train_file og.xyz --valid_file og.xyz --energy_key energy "
                                 "--forces_key forces");
  EXPECT_EQ(og.status, 1);
  EXPECT_NE(og.err.find("atom 2 has Z = 118"), std::string::npos) << og.err;
  fastmlip::io::remove_tree(dir);
}

/// `frames` periodic 400-atom fcc Cu/Ni boxes (a = 3.6 A, jittered) with made-up labels: frames
/// large enough that a bin of several needs far more memory than a bin of one.
void write_large_frames(const std::string& path, int frames) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> jitter(-0.1, 0.1), label(-0.1, 0.1);
  std::ofstream out(path);
  const double a = 3.6;
  const double basis[4][3] = {{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}};
  for (int f = 0; f < frames; ++f) {
    out << 400 << "\nLattice=\"" << 5 * a << " 0 0 0 " << 5 * a << " 0 0 0 " << 4 * a
        << "\" Properties=species:S:1:pos:R:3:forces:R:3 energy=" << -1400 + 10 * label(rng)
        << " pbc=\"T T T\"\n";
    for (int i = 0; i < 5; ++i) {
      for (int j = 0; j < 5; ++j) {
        for (int k = 0; k < 4; ++k) {
          for (const auto& b : basis) {
            out << ((i + j + k + f) % 3 == 0 ? "Ni" : "Cu") << " " << (i + b[0]) * a + jitter(rng) << " "
                << (j + b[1]) * a + jitter(rng) << " " << (k + b[2]) * a + jitter(rng) << " " << label(rng)
                << " " << label(rng) << " " << label(rng) << "\n";
          }
        }
      }
    }
  }
}

// Running out of memory in a step (bad input: a bin too large for the machine) is a clear error
// naming the rank, the bin and what to do, and the last checkpoint stays as it was. The memory
// is the address space prlimit allows: the smallest of a few limits under which a bin of one
// 400-atom frame trains, where a bin of eight cannot.
TEST(TrainPotential, OutOfMemoryInAStepNamesTheBinAndKeepsTheCheckpoint) {
  if (std::system("prlimit --version > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no prlimit (util-linux) to limit the address space";
  }
  const std::string dir = temp_dir("oom");
  write_large_frames(dir + "/large.xyz", 8);
  const std::string common =
      "--name o --seed 7 --train_file large.xyz --valid_fraction 0.125 --energy_key energy --forces_key "
      "forces "
      "--r_max 5.0 --num_channels 16 --max_L 1 --max_ell 2 --correlation 2 --num_interactions 2 --E0s "
      "average "
      "--max_num_epochs 1 --work_dir run ";
  std::string limit;
  for (const int mib : {1200, 1600, 2000, 2400, 2800}) {
    const std::string l = "prlimit --as=" + std::to_string(static_cast<long long>(mib) << 20);
    if (run(dir, common + "--batch_capacity 400", l).status == 0) {
      limit = l;
      break;
    }
  }
  if (limit.empty()) {
    GTEST_SKIP() << "a bin of one frame did not train within 2800 MiB of address space here";
  }
  const std::string ckpt = dir + "/run/checkpoints/o.ckpt";
  const std::string before = read_text(ckpt);
  ASSERT_FALSE(before.empty());
  const Result r = run(dir, common + "--batch_capacity 2800", limit);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(
      r.err.find("train-potential: error: rank 0 ran out of cpu memory in epoch 1, step 1 (a bin of 7 graphs "
                 "and 2800 atoms; "),
      std::string::npos)
      << r.err;
  EXPECT_NE(
      r.err.find("use a smaller --batch_capacity (now 2800 atoms; --accumulate_bins keeps the global batch), "
                 "or --default_dtype float32. The last checkpoint, run/checkpoints/o.ckpt, is intact"),
      std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1)
      << "one line, without LibTorch's backtrace: " << r.err;
  EXPECT_EQ(read_text(ckpt), before);
  fastmlip::io::remove_tree(dir);
}

// On a GPU (issue 23; skipped without one): training lowers the loss, a restart on the GPU is
// bitwise, a GPU checkpoint continues on the CPU to round-off, and two ranks sharing the GPU
// train as one rank accumulating two bins.
TEST(TrainPotential, OnAGpuTrainsRestartsAndMovesToTheCpu) {
  if (const std::string problem = trainer::device_problem(torch::Device(torch::kCUDA)); !problem.empty()) {
    GTEST_SKIP() << problem;
  }
  const std::string dir = temp_dir("gpu");
  write_dataset(dir + "/data.xyz", 16);
  write_config(dir + "/tiny.yaml", dir + "/data.xyz");
  const std::string common = "--config tiny.yaml --scheduler CosineAnnealingLR";
  const Result a = run(dir, common + " --device cuda --work_dir straight --max_num_epochs 3");
  ASSERT_EQ(a.status, 0) << a.out << a.err;
  EXPECT_NE(a.out.find("rank 0 on cuda:0"), std::string::npos) << a.out;
  const auto rows = csv_rows(read_text(dir + "/straight/results/tiny_train.csv"));
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_LT(std::stod(rows[3][2]), std::stod(rows[1][2])) << "the training loss did not go down";

  const Result b1 = run(dir, common + " --device cuda --work_dir split --max_num_epochs 2");
  ASSERT_EQ(b1.status, 0) << b1.out << b1.err;
  const Result b2 = run(dir, common +
                                 " --device cuda --work_dir split --max_num_epochs 3 --restart "
                                 "split/checkpoints/tiny.ckpt");
  ASSERT_EQ(b2.status, 0) << b2.out << b2.err;
  EXPECT_EQ(read_text(dir + "/split/tiny.safetensors"), read_text(dir + "/straight/tiny.safetensors"));
  EXPECT_EQ(read_text(dir + "/split/results/tiny_train.csv"),
            read_text(dir + "/straight/results/tiny_train.csv"));

  // The GPU's epoch-2 checkpoint, continued on the CPU: the same model to round-off.
  const Result c1 = run(dir, common + " --device cuda --work_dir moved --max_num_epochs 2");
  ASSERT_EQ(c1.status, 0) << c1.out << c1.err;
  const Result c2 = run(dir, common +
                                 " --device cpu --work_dir moved --max_num_epochs 3 --restart "
                                 "moved/checkpoints/tiny.ckpt");
  ASSERT_EQ(c2.status, 0) << c2.out << c2.err;
  std::string worst;
  EXPECT_LT(max_relative_difference(trainer::train::read_checkpoint(dir + "/moved/checkpoints/tiny.ckpt"),
                                    trainer::train::read_checkpoint(dir + "/straight/checkpoints/tiny.ckpt"),
                                    &worst),
            1e-9)
      << "worst tensor " << worst;

  // CHGNet (a fresh chgnet 0.3.0, two epochs of the MPtrj sample) on the GPU and on the CPU.
  const std::string chgnet = "--model chgnet --train_file '" + kMptrj + "' --valid_file '" + kMptrj +
                             "' --E0s average --batch_capacity 4 --name f --seed 7 --max_num_epochs 2 ";
  const Result cg = run(dir, chgnet + "--device cuda --work_dir chgnet_gpu");
  ASSERT_EQ(cg.status, 0) << cg.out << cg.err;
  const Result cc = run(dir, chgnet + "--device cpu --work_dir chgnet_cpu");
  ASSERT_EQ(cc.status, 0) << cc.out << cc.err;
  EXPECT_LT(max_relative_difference(trainer::train::read_checkpoint(dir + "/chgnet_gpu/checkpoints/f.ckpt"),
                                    trainer::train::read_checkpoint(dir + "/chgnet_cpu/checkpoints/f.ckpt"),
                                    &worst),
            1e-9)
      << "worst tensor " << worst;

  const Result one =
      run(dir, common + " --device cuda --work_dir one --max_num_epochs 2 --accumulate_bins 2");
  ASSERT_EQ(one.status, 0) << one.out << one.err;
  const Result two =
      run(dir, common + " --device cuda --work_dir two --max_num_epochs 2", kMpiexec + " -np 2");
  ASSERT_EQ(two.status, 0) << two.out << two.err;
  // Two ranks on one GPU: NCCL cannot serve them, so auto takes MPI and says so; nccl is refused.
  if (torch::cuda::device_count() == 1) {
    EXPECT_NE(two.out.find("gradients all-reduced by MPI"), std::string::npos) << two.out;
    const Result refused =
        run(dir, common + " --device cuda --work_dir refused --allreduce nccl", kMpiexec + " -np 2");
    EXPECT_NE(refused.status, 0);
    EXPECT_NE(refused.err.find(trainer::kHaveNccl ? "share GPU 0" : "built without NCCL"), std::string::npos)
        << refused.err;
  }
  EXPECT_LT(
      max_relative_difference(trainer::train::read_checkpoint(dir + "/one/checkpoints/tiny.ckpt"),
                              trainer::train::read_checkpoint(dir + "/two/checkpoints/tiny.ckpt"), &worst),
      1e-10)
      << "worst tensor " << worst;
  fastmlip::io::remove_tree(dir);
}

}  // namespace
}  // namespace fastmlip::test
