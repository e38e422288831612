// SPDX-License-Identifier: MIT
// Training checkpoints (trainer/train/checkpoint.hpp):
//  * round trip of every kind of entry, byte-reproducible files;
//  * a truncated, corrupt or foreign file is a FileError naming the file and what is wrong;
//  * a failed write (a missing directory; a write cut short, as on a full disk, simulated with
//    RLIMIT_FSIZE) leaves the previous checkpoint intact;
//  * exact restart: on a small MaceTorchModel<double> trained with the weighted loss on energies
//    and forces (forces by autograd with create_graph), AMSGrad Adam, clipping, EMA and the
//    plateau schedule, N + M steps straight equal N steps, a checkpoint, and M steps on fresh
//    model and optimiser objects loaded from it, bit for bit (parameters, EMA, learning rate).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <torch/torch.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../common/error_text.hpp"
#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "models/mace.hpp"
#include "train/checkpoint.hpp"
#include "train/loss.hpp"
#include "train/optim.hpp"

namespace fastmlip::test {
namespace {

namespace fs = std::filesystem;
using namespace trainer::train;

std::string temp_dir() {
  const fs::path d = fs::temp_directory_path() / ("fastmlip-ckpt-" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d.string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

CheckpointState sample_state() {
  CheckpointState s;
  s.tensors["a/f64"] = torch::randn({3, 2}, torch::kFloat64);
  s.tensors["a/f32"] = torch::randn({5}, torch::kFloat32);
  s.tensors["b/i64"] = torch::arange(4, torch::kInt64);
  s.tensors["b/u8"] = torch::zeros({0}, torch::kUInt8);
  s.tensors["c/scalar"] = torch::tensor(3.5, torch::kFloat64);
  s.ints["step"] = -7;
  s.reals["best"] = std::numeric_limits<double>::infinity();
  s.texts["options"] = "lr: 0.01\nname: x\n";
  return s;
}

TEST(TrainerCheckpoint, RoundTripAndReproducibleBytes) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/a.ckpt";
  const CheckpointState s = sample_state();
  write_checkpoint(path, s);
  const CheckpointState r = read_checkpoint(path);
  EXPECT_EQ(r.source, path);
  ASSERT_EQ(r.tensors.size(), s.tensors.size());
  for (const auto& [k, t] : s.tensors) {
    EXPECT_TRUE(torch::equal(r.tensor(k), t)) << k;
    EXPECT_EQ(r.tensor(k).scalar_type(), t.scalar_type()) << k;
  }
  EXPECT_EQ(r.integer("step"), -7);
  EXPECT_EQ(r.real("best"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(r.text("options"), s.texts.at("options"));
  EXPECT_EQ(serialize_checkpoint(r), slurp(path));
  const std::string missing = error_of([&] { r.integer("nope"); });
  EXPECT_NE(missing.find(path), std::string::npos) << missing;
  EXPECT_NE(missing.find("'nope'"), std::string::npos) << missing;
  fastmlip::io::remove_tree(dir);
}

TEST(TrainerCheckpoint, CorruptOrTruncatedFilesNameTheFileAndTheFault) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/c.ckpt";
  write_checkpoint(path, sample_state());
  const std::string good = slurp(path);
  auto check = [&](const std::string& bytes, const std::string& expect) {
    spit(path, bytes);
    const std::string what = error_of([&] { read_checkpoint(path); });
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(expect), std::string::npos) << "expected '" << expect << "' in: " << what;
  };
  check(good.substr(0, good.size() - 10), "truncated");
  check(good.substr(0, 12), "truncated");
  check(good + "x", "corrupt");
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x10;
  check(flipped, "checksum");
  check("not a checkpoint at all, just text", "not a fastmlip checkpoint");
  std::string version = good;
  version[8] = 9;
  check(version, "version 9");
  const std::string absent = error_of([&] { read_checkpoint(dir + "/absent.ckpt"); });
  EXPECT_NE(absent.find("absent.ckpt"), std::string::npos) << absent;
  // A payload whose checksum is right but whose records are wrong (a writer's bug, not bit rot).
  std::string bad = serialize_checkpoint(sample_state());
  const std::string payload = bad.substr(28);
  std::string cut = payload.substr(0, payload.size() - 3);
  std::string rebuilt = bad.substr(0, 12);
  const std::uint64_t n = cut.size();
  rebuilt.append(reinterpret_cast<const char*>(&n), 8);
  std::uint64_t h = 1469598103934665603ull;
  for (const char ch : cut) {
    h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  }
  rebuilt.append(reinterpret_cast<const char*>(&h), 8);
  check(rebuilt + cut, "runs past the end");
  fastmlip::io::remove_tree(dir);
}

TEST(TrainerCheckpoint, FailedWriteLeavesThePreviousCheckpointIntact) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/keep.ckpt";
  CheckpointState small;
  small.ints["step"] = 1;
  write_checkpoint(path, small);
  const std::string before = slurp(path);
  // A directory that does not exist.
  EXPECT_THROW(write_checkpoint(dir + "/no/such/dir/x.ckpt", small), FileError);
  // A write cut short, as on a full disk: files may not grow past 4 KiB while writing ~80 KB.
  CheckpointState big;
  big.ints["step"] = 2;
  big.tensors["w"] = torch::randn({10000}, torch::kFloat64);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit lim = old;
  lim.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  const std::string what = error_of([&] { write_checkpoint(path, big); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(what.find(path), std::string::npos) << what;
  EXPECT_EQ(slurp(path), before);
  EXPECT_EQ(read_checkpoint(path).integer("step"), 1);
  // No temporary file is left behind.
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) {
    ++files;
  }
  EXPECT_EQ(files, 1u);
  fastmlip::io::remove_tree(dir);
}

// ---------------------------------------------------------------------------------------------
// Exact restart on a small MACE.

trainer::MaceConfig tiny_config() {
  trainer::MaceConfig c;
  c.layout.atomic_numbers = {29, 28};
  c.e0s = {-1.3, -2.1};
  c.layout.r_max = 3.5;
  c.layout.num_bessel = 4;
  c.layout.num_channels = 3;
  c.layout.max_ell = 2;
  c.layout.max_L = 1;
  c.layout.correlation = {2};
  c.layout.num_interactions = 2;
  c.layout.radial_mlp = {6, 5};
  c.layout.mlp_irreps = 4;
  c.layout.avg_num_neighbors = 3.0;
  c.scale = 1.2;
  c.shift = 0.1;
  c.seed = 17;
  return c;
}

trainer::MaceStructure structure(int n, double side, std::uint64_t seed, bool periodic) {
  trainer::MaceStructure s;
  // A jittered simple cubic arrangement: atoms never overlap.
  torch::Generator g = at::detail::createCPUGenerator(seed);
  const int per_side = static_cast<int>(std::ceil(std::cbrt(static_cast<double>(n))));
  const double a = side / per_side;
  for (int i = 0; i < n; ++i) {
    const int ix = i % per_side, iy = (i / per_side) % per_side, iz = i / (per_side * per_side);
    const auto jitter = torch::rand({3}, g, torch::kFloat64);
    s.positions.push_back((ix + 0.2 * jitter[0].item<double>()) * a);
    s.positions.push_back((iy + 0.2 * jitter[1].item<double>()) * a);
    s.positions.push_back((iz + 0.2 * jitter[2].item<double>()) * a);
    s.species.push_back(i % 2);
  }
  if (periodic) {
    s.cell = std::array<double, 9>{side, 0, 0, 0.3, side, 0, 0, -0.2, side};
    s.pbc = {true, true, true};
  }
  return s;
}

struct TrainingRun {
  trainer::MaceTorchModel<double> model;
  Optimization opt;
  TrainingRun(const io::PotentialFile& pot, const OptimConfig& c)
      : model(pot), opt(model.named_parameters(), c) {}
};

struct Data {
  trainer::MaceBatch batch;
  std::vector<trainer::data::Config> configs;
  LossTargets targets;
};

Data make_data() {
  Data d;
  const std::vector<trainer::MaceStructure> s = {structure(8, 4.4, 1, true), structure(5, 3.0, 2, false)};
  d.batch = trainer::make_mace_batch(s, 3.5);
  torch::Generator g = at::detail::createCPUGenerator(99);
  for (const auto& x : s) {
    trainer::data::Config c;
    c.positions = x.positions;
    c.atomic_numbers.assign(x.species.size(), 29);
    c.energy =
        -2.0 * static_cast<double>(x.species.size()) + torch::randn({1}, g, torch::kFloat64).item<double>();
    const auto f = 0.3 * torch::randn({static_cast<std::int64_t>(x.species.size()) * 3}, g, torch::kFloat64);
    c.forces.assign(f.data_ptr<double>(), f.data_ptr<double>() + f.numel());
    d.configs.push_back(c);
  }
  d.configs[1].weight = 0.7;
  d.targets = make_loss_targets({&d.configs[0], &d.configs[1]}, torch::kFloat64);
  return d;
}

/// One optimisation step; the torch generator perturbs the targets (as a noise-augmented
/// trainer would), so that a restart must restore it too.
void train_step(TrainingRun& r, const Data& d) {
  LossConfig lc;
  lc.forces_weight = 10.0;
  trainer::MaceForwardOptions fo;
  fo.create_graph = true;
  const auto out = r.model.forward(d.batch, fo);
  LossTargets t = d.targets;
  t.energy = t.energy + 1e-3 * torch::randn_like(t.energy);
  r.opt.zero_grad();
  compute_loss(lc, {out.energy, out.forces, {}, {}}, t).total.backward();
  r.opt.step();
}

OptimConfig restart_config() {
  OptimConfig c;
  c.lr = 0.005;
  c.amsgrad = true;
  c.weight_decay = 1e-3;
  c.clip_grad = 0.5;  // small enough to clip
  c.ema = true;
  c.ema_decay = 0.9;
  c.lr_factor = 0.5;
  c.scheduler_patience = 0;
  return c;
}

void train(TrainingRun& r, const Data& d, int from, int to) {
  for (int k = from; k < to; ++k) {
    train_step(r, d);
    if (k % 2 == 1) {  // an "epoch" every two steps, with a validation loss that plateaus
      r.opt.end_epoch(1.0 + 0.1 * (k % 3));
    }
  }
}

TEST(TrainerCheckpoint, RestartContinuesBitwise) {
  const io::PotentialFile pot = trainer::make_mace_potential(tiny_config());
  const Data d = make_data();
  constexpr int kN = 3, kM = 3;
  const OptimConfig c = restart_config();

  torch::manual_seed(1234);
  TrainingRun straight(pot, c);
  train(straight, d, 0, kN + kM);

  torch::manual_seed(1234);
  const std::string dir = temp_dir();
  const std::string path = dir + "/run.ckpt";
  {
    TrainingRun first(pot, c);
    train(first, d, 0, kN);
    CheckpointState s;
    save_tensors(s, "model/", first.model.named_parameters());
    first.opt.save(s);
    save_torch_rng(s);
    write_checkpoint(path, s);
  }
  torch::manual_seed(999);  // whatever happened in between
  (void)torch::randn({17});
  // Fresh objects: the restarted run knows only the initial potential file and the checkpoint.
  TrainingRun second(pot, c);
  {
    const CheckpointState s = read_checkpoint(path);
    load_tensors(s, "model/", second.model.named_parameters());
    second.opt.load(s);
    load_torch_rng(s);
  }
  EXPECT_EQ(second.opt.steps(), kN);
  train(second, d, kN, kN + kM);

  EXPECT_EQ(second.opt.steps(), straight.opt.steps());
  EXPECT_EQ(second.opt.epochs(), straight.opt.epochs());
  EXPECT_EQ(second.opt.lr(), straight.opt.lr());
  EXPECT_LT(straight.opt.lr(), c.lr);  // the plateau schedule did act
  const auto& a = straight.model.named_parameters();
  const auto& b = second.model.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    EXPECT_TRUE(torch::equal(a[k].second, b[k].second)) << a[k].first;
  }
  ASSERT_NE(straight.opt.ema(), nullptr);
  for (std::size_t k = 0; k < a.size(); ++k) {
    EXPECT_TRUE(torch::equal(straight.opt.ema()->shadow()[k], second.opt.ema()->shadow()[k])) << a[k].first;
  }
  // And the weights did move.
  const trainer::MaceTorchModel<double> initial(pot);
  EXPECT_FALSE(torch::equal(initial.named_parameters()[0].second, a[0].second));
  fastmlip::io::remove_tree(dir);
}

TEST(TrainerCheckpoint, LoadingAnotherModelOrOptimiserIsAnError) {
  const io::PotentialFile pot = trainer::make_mace_potential(tiny_config());
  trainer::MaceConfig other = tiny_config();
  other.layout.num_channels = 4;
  TrainingRun a(pot, restart_config());
  CheckpointState s;
  s.source = "x.ckpt";
  save_tensors(s, "model/", a.model.named_parameters());
  a.opt.save(s);
  trainer::MaceTorchModel<double> b(trainer::make_mace_potential(other));
  const std::string what = error_of([&] { load_tensors(s, "model/", b.named_parameters()); });
  EXPECT_NE(what.find("x.ckpt"), std::string::npos) << what;
  EXPECT_NE(what.find("another model"), std::string::npos) << what;
  OptimConfig adamw = restart_config();
  adamw.optimizer = OptimizerKind::kAdamW;
  Optimization o(a.model.named_parameters(), adamw);
  EXPECT_THROW(o.load(s), InputError);
}

}  // namespace
}  // namespace fastmlip::test
