// SPDX-License-Identifier: MIT
// The trainer's CHGNet (trainer/models/chgnet.*): LibTorch autograd over the core's bases.
//  * Parity: on every structure of tests/reference/data/chgnet with the shipped
//    potentials/chgnet-0.3.0.safetensors (and the committed 0.2.0 checkpoint, which has no
//    LayerNorm), energy, site energies, forces, virial and magnetic moments equal the core's
//    ChgnetModel (the pair style's model) in double, to 1e-10 relative.
//  * Batching: structures in one batch give what each gives alone.
//  * Gradients: d(a loss of energy, forces, virial and magmoms)/d(weights) (the double backward,
//    through the kernels' Dual twins for the bases) against central finite differences, on a
//    few entries of every parameter tensor, with the real model on a 4-atom cell, and every
//    entry of a small random model with odd widths (which is also checked against the core).
//  * float32 agrees with float64; a second derivative through the basis frequencies is refused.
//  * Direct heads (FastCHGNet): forces rotate as vectors and sum to zero, virials as tensors;
//    one backward without create_graph reaches every weight; saved, reloaded, ignored by the core.
//  * Export: save() writes the file format; load + save is the identity; the core reads an
//    exported, fine-tuned model and gives the trainer model's energy; one optimiser step
//    changes the weights and the export carries the change.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../models/chgnet_test_util.hpp"
#include "io/potential_file.hpp"
#include "models/chgnet.hpp"

namespace fastmlip::test {
namespace {

namespace fs = std::filesystem;
using trainer::ChgnetBatch;
using trainer::ChgnetForwardOptions;
using trainer::ChgnetTorchModel;

const std::string kFixtures = std::string(FASTMLIP_REFERENCE_DATA_DIR) + "/chgnet";
const std::string kPotential = std::string(FASTMLIP_SOURCE_DIR) + "/potentials/chgnet-0.3.0.safetensors";

/// The structures of the fixtures (not the layer-by-layer debug dumps), by name.
std::vector<std::pair<std::string, trainer::ChgnetStructure>> fixture_structures() {
  std::vector<std::pair<std::string, trainer::ChgnetStructure>> out;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kFixtures)) {
    const auto stem = e.path().stem().string();
    if (e.path().extension() == ".json" && stem.find("_debug") == std::string::npos) {
      files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    const auto j = nlohmann::json::parse(in);
    trainer::ChgnetStructure s;
    std::array<double, 9> cell{};
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) {
        cell[3 * a + b] = j.at("lattice")[a][b].get<double>();
      }
    }
    s.cell = cell;
    for (const auto& p : j.at("positions")) {
      for (const auto& x : p) {
        s.positions.push_back(x.get<double>());
      }
    }
    for (const auto& z : j.at("numbers")) {
      s.atomic_numbers.push_back(z.get<int>());
    }
    for (int k = 0; k < 3; ++k) {
      s.pbc[k] = j.at("pbc")[k].get<bool>();
    }
    out.emplace_back(f.stem().string(), s);
  }
  return out;
}

/// A few of them, for the slower tests: periodic images of the atom itself, a triclinic cell,
/// an empty bond graph.
std::vector<trainer::ChgnetStructure> some_structures() {
  std::vector<trainer::ChgnetStructure> out;
  for (const auto& [name, s] : fixture_structures()) {
    if (name == "limno2_rattled" || name == "small_cell" || name == "licoo2_triclinic" ||
        name == "dimer_isolated") {
      out.push_back(s);
    }
  }
  EXPECT_EQ(out.size(), 4u);
  return out;
}

/// The core's results for one structure (chgnet_test_util's evaluate: stress in GPa).
ChgnetOutputs core_outputs(models::ChgnetModel<double>& core, const trainer::ChgnetStructure& s) {
  ChgnetStructure t;
  t.lattice = *s.cell;
  t.positions = s.positions;
  t.numbers = s.atomic_numbers;
  t.pbc = s.pbc;
  return evaluate(core, t);
}

double volume(const std::array<double, 9>& L) {
  return std::abs(L[0] * (L[4] * L[8] - L[5] * L[7]) - L[1] * (L[3] * L[8] - L[5] * L[6]) +
                  L[2] * (L[3] * L[7] - L[4] * L[6]));
}

std::vector<double> values(const torch::Tensor& t) {
  const auto c = t.detach().to(torch::kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) {
    m = std::max(m, std::abs(x));
  }
  return m;
}

/// max |a - b| / max(1, max |b|): the deviation relative to the quantity's scale.
double rel_dev(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
  }
  return d / std::max(1.0, max_abs(b));
}

const ChgnetForwardOptions kAll{true, true, false};

/// Parity of the trainer model with the core on the fixture structures (all, or those named),
/// for one potential.
void check_parity(const std::string& potential, const std::vector<std::string>& only = {}) {
  const auto file = io::read_potential_file(potential);
  models::ChgnetModel<double> core(file);
  ChgnetTorchModel<double> model(file);
  double worst = 0;
  for (const auto& [name, s] : fixture_structures()) {
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) {
      continue;
    }
    const auto ref = core_outputs(core, s);
    const auto b = trainer::make_chgnet_batch({s}, model.cutoff(), model.bond_cutoff());
    const auto out = model.forward(b, kAll);
    const double V = volume(*s.cell);
    std::vector<double> virial(9);
    for (int k = 0; k < 9; ++k) {
      virial[k] = -ref.stress[k] * V / kEvPerA3ToGPa;  // chgnet's stress = -virial / V
    }
    const double de = std::abs(out.energy.item<double>() - ref.energy) / std::max(1.0, std::abs(ref.energy));
    const double df = rel_dev(values(out.forces), ref.forces);
    const double dv = rel_dev(values(out.virials), virial);
    const double dm = rel_dev(values(out.magmom), ref.magmoms);
    const double ds = rel_dev(values(out.site_energy), ref.site_energies);
    EXPECT_LE(de, 1e-10) << name << ": energy";
    EXPECT_LE(df, 1e-10) << name << ": forces";
    EXPECT_LE(dv, 1e-10) << name << ": virial";
    EXPECT_LE(dm, 1e-10) << name << ": magmoms";
    EXPECT_LE(ds, 1e-10) << name << ": site energies";
    worst = std::max({worst, de, df, dv, dm, ds});
  }
  // The measured deviation, for the record (docs/train-potential.md quotes it).
  std::printf("[ parity  ] %s: largest relative deviation from the core ChgnetModel %.2e\n",
              fs::path(potential).filename().c_str(), worst);
}

TEST(ChgnetTorch, ParityWithCoreModelOnEveryFixture) { check_parity(kPotential); }

TEST(ChgnetTorch, ParityWithCoreModelWithoutLayerNorm) {
  check_parity(kFixtures + "/chgnet-0.2.0.safetensors", {"limno2_rattled", "licoo2_triclinic", "small_cell"});
}

TEST(ChgnetTorch, OneBatchEqualsOneStructureAtATime) {
  ChgnetTorchModel<double> model(io::read_potential_file(kPotential));
  const auto all = some_structures();
  const auto joint =
      model.forward(trainer::make_chgnet_batch(all, model.cutoff(), model.bond_cutoff()), kAll);
  ASSERT_EQ(joint.energy.size(0), static_cast<std::int64_t>(all.size()));
  std::int64_t node0 = 0;
  for (std::size_t g = 0; g < all.size(); ++g) {
    const auto one =
        model.forward(trainer::make_chgnet_batch({all[g]}, model.cutoff(), model.bond_cutoff()), kAll);
    const auto n = one.forces.size(0);
    EXPECT_NEAR(joint.energy[g].item<double>(), one.energy[0].item<double>(),
                1e-12 * std::abs(one.energy[0].item<double>()));
    EXPECT_LE(rel_dev(values(joint.forces.narrow(0, node0, n)), values(one.forces)), 1e-12) << g;
    EXPECT_LE(rel_dev(values(joint.magmom.narrow(0, node0, n)), values(one.magmom)), 1e-12) << g;
    EXPECT_LE(rel_dev(values(joint.virials[g]), values(one.virials[0])), 1e-12) << g;
    node0 += n;
  }
  EXPECT_EQ(node0, joint.forces.size(0));
}

/// Li, Mn and two O within 3 A of each other in a 10 A cell (no image within the cutoff):
/// angles, and a graph small enough for finite differences over every tensor.
trainer::ChgnetStructure small_cell() {
  trainer::ChgnetStructure s;
  s.atomic_numbers = {3, 25, 8, 8};
  s.positions = {0.1, 0.2, 0.0, 1.9, 0.3, 0.4, 0.4, 1.9, 0.2, 1.2, 1.4, 1.6};
  s.cell = std::array<double, 9>{10.0, 0, 0, 0.3, 10.1, 0, 0, 0.2, 9.9};
  s.pbc = {true, true, true};
  return s;
}

/// A loss of every output the trainer trains on: linear in forces, virial and magmoms with
/// fixed coefficients, so that its gradient is the double backward itself.
torch::Tensor probe_loss(ChgnetTorchModel<double>& model, const ChgnetBatch& b, bool create_graph) {
  const auto out = model.forward(b, {true, true, create_graph});
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  const auto cf = torch::linspace(-1.0, 1.3, out.forces.numel(), opts).reshape(out.forces.sizes());
  const auto cv = torch::linspace(0.7, -0.4, 9, opts).reshape({1, 3, 3});
  const auto cm = torch::linspace(0.5, 1.5, out.magmom.numel(), opts);
  return 0.1 * out.energy.sum() + (out.forces * cf).sum() + (out.virials * cv).sum() +
         (out.magmom * cm).sum();
}

/// Compares the gradient of probe_loss with central differences (h = 1e-5 relative) on the
/// entries entries_of(name, parameter) of every parameter, within 1e-6 relative plus
/// atol x max(1, |loss|).
/// Returns the entries checked and the largest relative error where |difference| > 1e-3 (well
/// above the differences' noise).
std::pair<int, double> check_gradients(
    ChgnetTorchModel<double>& model, const ChgnetBatch& b, double atol,
    const std::function<std::vector<std::int64_t>(const std::string&, const torch::Tensor&)>& entries_of) {
  const auto params = model.parameters();
  const auto loss = probe_loss(model, b, true);
  const auto grads = torch::autograd::grad({loss}, params);
  const double tol = atol * std::max(1.0, std::abs(loss.item<double>()));
  torch::NoGradGuard no_grad;
  int checked = 0;
  double worst = 0;
  for (std::size_t p = 0; p < params.size(); ++p) {
    const auto& name = model.named_parameters()[p].first;
    auto flat = params[p].view(-1);
    const auto g = grads[p].view(-1);
    for (const auto i : entries_of(name, params[p])) {
      const double w0 = flat[i].item<double>(), h = 1e-5 * std::max(1.0, std::abs(w0));
      flat[i] = w0 + h;
      const double lp = probe_loss(model, b, false).item<double>();
      flat[i] = w0 - h;
      const double lm = probe_loss(model, b, false).item<double>();
      flat[i] = w0;
      const double fd = (lp - lm) / (2 * h), ag = g[i].item<double>();
      EXPECT_NEAR(ag, fd, 1e-6 * (std::abs(ag) + std::abs(fd)) + tol) << name << "[" << i << "]";
      if (std::abs(fd) > 1e-3) {
        worst = std::max(worst, std::abs(ag - fd) / std::abs(fd));
      }
      ++checked;
    }
  }
  return {checked, worst};
}

/// Embedding entries in the rows of Li, O and Mn, the species of small_cell (the other rows
/// have no gradient).
bool in_small_cell_rows(std::int64_t i, std::int64_t width) {
  const auto row = i / width;
  return row == 2 || row == 7 || row == 24;
}

TEST(ChgnetTorch, ForceLossGradientMatchesFiniteDifferences) {
  ChgnetTorchModel<double> model(io::read_potential_file(kPotential));
  const auto b = trainer::make_chgnet_batch({small_cell()}, model.cutoff(), model.bond_cutoff());
  ASSERT_GT(b.angle_a.size(0), 0);
  // Two entries per tensor.
  const auto [checked, worst] =
      check_gradients(model, b, 1e-8, [](const std::string& name, const torch::Tensor& t) {
        const auto n = t.numel();
        if (name == "atom_embedding.embedding.weight") {
          const auto F = t.size(1);
          return std::vector<std::int64_t>{2 * F + 3, 24 * F + 10, 7 * F + 63};
        }
        return n == 1 ? std::vector<std::int64_t>{0} : std::vector<std::int64_t>{n / 3, n - 1};
      });
  EXPECT_GE(checked, 2 * 100);
  std::printf("[ gradient] %d entries, largest relative error against central differences %.1e\n", checked,
              worst);
}

/// A small CHGNet potential with odd, unequal widths (so a transposed or mis-split weight
/// cannot go unnoticed), 3 convolutions, output-layer biases, hidden layers of different widths
/// and none in the angle update, random weights and perturbed (non-harmonic) frequencies. The
/// metadata is the shipped file's with the hyperparameters changed.
io::PotentialFile small_random_potential(std::uint64_t seed) {
  const auto shipped = io::read_potential_file(kPotential);
  io::PotentialFile f;
  f.metadata = shipped.metadata;
  const int Fa = 5, Fb = 7, Fg = 3, nr = 5, na = 7, n_conv = 3, ha = 3, hb = 4;
  auto& hp = f.metadata["hyperparameters"];
  hp["atom_fea_dim"] = Fa, hp["bond_fea_dim"] = Fb, hp["angle_fea_dim"] = Fg;
  hp["num_radial"] = nr, hp["num_angular"] = na, hp["n_conv"] = n_conv;
  hp["atom_conv_hidden_dim"] = ha, hp["bond_conv_hidden_dim"] = hb, hp["angle_layer_hidden_dim"] = 0;
  hp["mlp_hidden_dims"] = {5, 3};
  hp["mlp_out_bias"] = true;
  hp["version"] = "test";
  auto gen = at::detail::createCPUGenerator(seed);
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape, double scale, double shift = 0.0) {
    const auto t = torch::randn(shape, gen, torch::TensorOptions().dtype(torch::kFloat64)) * scale + shift;
    f.add<double>(name, shape, std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel()));
  };
  auto linear = [&](const std::string& prefix, std::int64_t in, std::int64_t out, bool bias) {
    add(prefix + ".weight", {out, in}, 1.0 / std::sqrt(static_cast<double>(in)));
    if (bias) {
      add(prefix + ".bias", {out}, 0.1);
    }
  };
  auto gated = [&](const std::string& prefix, std::int64_t in, std::int64_t hidden, std::int64_t out) {
    for (const char* part : {".mlp_core.layers.", ".mlp_gate.layers."}) {
      if (hidden > 0) {
        linear(prefix + part + "0", in, hidden, true);
        linear(prefix + part + "3", hidden, out, true);
      } else {
        linear(prefix + part + "1", in, out, true);
      }
    }
    for (const char* bn : {".bn1", ".bn2"}) {
      add(prefix + bn + ".weight", {out}, 0.1, 1.0);
      add(prefix + bn + ".bias", {out}, 0.1);
    }
  };
  add("atom_embedding.embedding.weight", {94, Fa}, 1.0);
  add("composition_model.fc.weight", {1, 94}, 1.0, -3.0);
  std::vector<double> fr, fk;
  for (int n = 1; n <= nr; ++n) {
    fr.push_back(M_PI * n * (1.0 + 0.01 * n));
  }
  for (int k = 1; k <= (na - 1) / 2; ++k) {
    fk.push_back(k + 0.03 * k * k);
  }
  f.add<double>("bond_basis_expansion.rbf_expansion_ag.frequencies", {nr}, fr);
  f.add<double>("bond_basis_expansion.rbf_expansion_bg.frequencies", {nr}, fr);
  f.add<double>("angle_basis_expansion.fourier_expansion.frequencies", {(na - 1) / 2}, fk);
  linear("bond_embedding", nr, Fb, false);
  linear("bond_weights_ag", nr, Fa, false);
  linear("bond_weights_bg", nr, Fb, false);
  linear("angle_embedding", na, Fg, false);
  for (int k = 0; k < n_conv; ++k) {
    const std::string a = "atom_conv_layers." + std::to_string(k);
    gated(a + ".twoBody_atom", 2 * Fa + Fb, ha, Fa);
    linear(a + ".mlp_out.layers.1", Fa, Fa, true);
  }
  for (int k = 0; k + 1 < n_conv; ++k) {
    const std::string b = "bond_conv_layers." + std::to_string(k);
    gated(b + ".twoBody_bond", 2 * Fb + Fg + Fa, hb, Fb);
    linear(b + ".mlp_out.layers.1", Fb, Fb, true);
    gated("angle_layers." + std::to_string(k) + ".twoBody_bond", 2 * Fb + Fg + Fa, 0, Fg);
  }
  linear("site_wise", Fa, 1, true);
  add("readout_norm.weight", {Fa}, 0.1, 1.0);
  add("readout_norm.bias", {Fa}, 0.1);
  linear("mlp.layers.0", Fa, 5, true);
  linear("mlp.layers.2", 5, 3, true);
  linear("mlp.layers.5", 3, 1, true);
  return f;
}

TEST(ChgnetTorch, SmallRandomOddSizedModel) {
  const auto file = small_random_potential(11);
  models::ChgnetModel<double> core(file);
  ChgnetTorchModel<double> model(file);
  // Parity with the core on four structures (images of the atom itself, triclinic, rattled, no angles).
  for (const auto& s : some_structures()) {
    const auto ref = core_outputs(core, s);
    const auto out =
        model.forward(trainer::make_chgnet_batch({s}, model.cutoff(), model.bond_cutoff()), kAll);
    const double scale = std::max(1.0, std::abs(ref.energy));
    EXPECT_LE(std::abs(out.energy.item<double>() - ref.energy) / scale, 1e-10);
    EXPECT_LE(rel_dev(values(out.forces), ref.forces), 1e-10);
    EXPECT_LE(rel_dev(values(out.magmom), ref.magmoms), 1e-10);
  }
  // The force-loss gradient of every entry of every tensor against central differences.
  const auto b = trainer::make_chgnet_batch({small_cell()}, model.cutoff(), model.bond_cutoff());
  const auto [checked, worst] =
      check_gradients(model, b, 1e-9, [](const std::string& name, const torch::Tensor& t) {
        std::vector<std::int64_t> all;
        for (std::int64_t i = 0; i < t.numel(); ++i) {
          if (name != "atom_embedding.embedding.weight" || in_small_cell_rows(i, t.size(-1))) {
            all.push_back(i);
          }
        }
        return all;
      });
  std::printf("[ gradient] small model: %d entries (all), largest relative error %.1e\n", checked, worst);
}

TEST(ChgnetTorch, SecondDerivativesThroughTheBasisFrequenciesAreRefused) {
  ChgnetTorchModel<double> model(io::read_potential_file(kPotential));
  const auto b = trainer::make_chgnet_batch({small_cell()}, model.cutoff(), model.bond_cutoff());
  torch::Tensor w;
  for (const auto& [name, p] : model.named_parameters()) {
    if (name == "bond_basis_expansion.rbf_expansion_ag.frequencies") {
      w = p;
    }
  }
  ASSERT_TRUE(w.defined());
  const auto out = model.forward(b, {false, false, false});
  const auto dw = torch::autograd::grad({out.energy.sum()}, {w}, {}, true, true)[0];
  // d(dE/dw)/dW needs the kernel's derivative along a frequency tangent, which it does not
  // have: an error, not a silently wrong (frequency-blind) number.
  std::string message;
  try {
    torch::autograd::grad({dw.sum()}, {w});
  } catch (const std::exception& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("basis frequencies"), std::string::npos) << message;
}

TEST(ChgnetTorch, Float32AgreesWithFloat64) {
  const auto file = io::read_potential_file(kPotential);
  ChgnetTorchModel<float> single(file);
  ChgnetTorchModel<double> dbl(file);
  double de = 0, df = 0, dv = 0, dm = 0;
  for (const auto& s : some_structures()) {
    const auto name = std::to_string(s.atomic_numbers.size()) + " atoms";
    const auto b = trainer::make_chgnet_batch({s}, dbl.cutoff(), dbl.bond_cutoff());
    const auto o32 = single.forward(b, kAll), o64 = dbl.forward(b, kAll);
    EXPECT_EQ(o32.energy.scalar_type(), torch::kFloat32);
    const double e = o64.energy.item<double>();
    de = std::max(de, std::abs(o32.energy.item<double>() - e) / std::abs(e));
    df = std::max(df, rel_dev(values(o32.forces), values(o64.forces)));
    dv = std::max(dv, rel_dev(values(o32.virials), values(o64.virials)));
    dm = std::max(dm, rel_dev(values(o32.magmom), values(o64.magmom)));
    EXPECT_LE(de, 2e-6) << name;
    EXPECT_LE(df, 1e-4) << name;
    // The virial sums a term per edge: float32 keeps about 1e-4 of it.
    EXPECT_LE(dv, 1e-3) << name;
    EXPECT_LE(dm, 1e-5) << name;
  }
  std::printf(
      "[ float32 ] relative deviation from float64: energy %.1e, forces %.1e, virial %.1e, magmoms %.1e\n",
      de, df, dv, dm);
  // The double backward runs in float32 too.
  const auto b = trainer::make_chgnet_batch({small_cell()}, single.cutoff(), single.bond_cutoff());
  const auto out = single.forward(b, {true, true, true});
  const auto g =
      torch::autograd::grad({(out.forces * out.forces).sum()}, single.parameters(), {}, false, false, true);
  double norm = 0;
  for (const auto& t : g) {
    if (t.defined()) {
      norm += t.to(torch::kFloat64).pow(2).sum().item<double>();
    }
  }
  EXPECT_TRUE(std::isfinite(norm) && norm > 0);
}

TEST(ChgnetTorch, EveryTensorButTheFrozenOnesIsAParameterUnderItsFileName) {
  const auto file = io::read_potential_file(kPotential);
  ChgnetTorchModel<double> model(file);
  std::size_t n = 0;
  for (const auto& [name, t] : model.named_parameters()) {
    ASSERT_TRUE(file.contains(name)) << name;
    EXPECT_EQ(t.sizes().vec(), file.get(name).shape) << name;
    EXPECT_TRUE(t.requires_grad()) << name;
    ++n;
  }
  // The AtomRef energies and the 8 tensors of the unread last AngleUpdate stay as read.
  EXPECT_EQ(n + 1 + 8, file.size());
}

/// A file name in the test's temporary directory, unique to this process.
std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("fastmlip_chgnet_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(ChgnetTorch, SaveThenLoadAndSaveAgainIsTheIdentity) {
  const auto file = io::read_potential_file(kPotential);
  ChgnetTorchModel<double> model(file);
  const auto p1 = temp_path("a.safetensors"), p2 = temp_path("b.safetensors");
  model.save(p1);
  const auto saved = io::read_potential_file(p1);
  EXPECT_EQ(saved.model_kind(), "chgnet");
  EXPECT_EQ(saved.meta<std::string>("/dtype"), "float64");
  EXPECT_EQ(saved.metadata.at("hyperparameters"), file.metadata.at("hyperparameters"));
  ASSERT_EQ(saved.size(), file.size());
  for (const auto& [name, t] : file.tensors()) {
    ASSERT_TRUE(saved.contains(name)) << name;
    EXPECT_EQ(saved.get(name).shape, t.shape) << name;
    EXPECT_EQ(saved.values<double>(name, t.shape, io::Conversion::widen),
              file.values<double>(name, t.shape, io::Conversion::widen))
        << name;
  }
  ChgnetTorchModel<double>(saved).save(p2);
  EXPECT_EQ(bytes_of(p1), bytes_of(p2));
  fs::remove(p1);
  fs::remove(p2);
}

TEST(ChgnetTorch, OneFineTuningStepChangesTheWeightsAndTheCoreReadsTheExport) {
  ChgnetTorchModel<double> model(io::read_potential_file(kPotential));
  const auto s = some_structures()[2];  // limno2_rattled
  const auto b = trainer::make_chgnet_batch({s}, model.cutoff(), model.bond_cutoff());
  const auto before = model.forward(b, kAll);
  std::vector<torch::Tensor> start;
  for (const auto& p : model.parameters()) {
    start.push_back(p.detach().clone());
  }
  // Labels a little off the model's own prediction, so that the loss has a gradient.
  const auto e_ref = before.energy.detach() + 0.5;
  const auto f_ref = before.forces.detach() * 1.1 + 0.01;
  torch::optim::Adam adam(model.parameters(), torch::optim::AdamOptions(1e-3));
  adam.zero_grad();
  const auto out = model.forward(b, {true, false, true});
  const auto loss = (out.energy - e_ref).pow(2).sum() + 10.0 * (out.forces - f_ref).pow(2).mean();
  loss.backward();
  adam.step();
  int changed = 0;
  for (std::size_t k = 0; k < start.size(); ++k) {
    changed += torch::equal(start[k], model.parameters()[k].detach()) ? 0 : 1;
  }
  // Adam moves every weight with a gradient by about lr; unused embedding rows and the like
  // have none, but most tensors do.
  EXPECT_GT(changed, static_cast<int>(start.size()) * 3 / 4);

  const auto path = temp_path("tuned.safetensors");
  model.save(path);
  const auto tuned = io::read_potential_file(path);
  for (const auto& [name, p] : model.named_parameters()) {
    EXPECT_EQ(tuned.values<double>(name, tuned.get(name).shape), values(p)) << name;
  }
  const auto after = model.forward(b, kAll);
  EXPECT_GT(std::abs(after.energy.item<double>() - before.energy.item<double>()), 1e-4);
  // The pair style's model on the exported file gives the fine-tuned model's results.
  models::ChgnetModel<double> core(tuned);
  const auto ref = core_outputs(core, s);
  EXPECT_LE(std::abs(after.energy.item<double>() - ref.energy) / std::abs(ref.energy), 1e-10);
  EXPECT_LE(rel_dev(values(after.forces), ref.forces), 1e-10);
  EXPECT_LE(rel_dev(values(after.magmom), ref.magmoms), 1e-10);
  std::printf("[ export  ] after one Adam step: energy %.12f (core on the export %.12f), moved by %.3e eV\n",
              after.energy.item<double>(), ref.energy,
              after.energy.item<double>() - before.energy.item<double>());
  fs::remove(path);
}

/// `s` rotated by 0.7 rad about (1, 2, 3): positions and cell rows r -> R r.
std::pair<trainer::ChgnetStructure, torch::Tensor> rotated(const trainer::ChgnetStructure& s) {
  const auto opts = torch::TensorOptions().dtype(torch::kFloat64);
  auto axis = torch::tensor({1.0, 2.0, 3.0}, opts);
  axis = axis / axis.norm();
  const auto K = torch::zeros({3, 3}, opts);
  K[0][1] = -axis[2], K[0][2] = axis[1], K[1][0] = axis[2], K[1][2] = -axis[0], K[2][0] = -axis[1],
  K[2][1] = axis[0];
  const auto R = torch::eye(3, opts) + std::sin(0.7) * K + (1 - std::cos(0.7)) * K.mm(K);
  auto rot = s;
  const auto n = static_cast<std::int64_t>(s.atomic_numbers.size());
  const auto p = torch::tensor(s.positions, opts).view({n, 3}).mm(R.t()).contiguous();
  rot.positions.assign(p.data_ptr<double>(), p.data_ptr<double>() + 3 * n);
  const auto c =
      torch::tensor(std::vector<double>(s.cell->begin(), s.cell->end()), opts).view({3, 3}).mm(R.t());
  std::array<double, 9> cell{};
  std::copy(c.contiguous().data_ptr<double>(), c.contiguous().data_ptr<double>() + 9, cell.begin());
  rot.cell = cell;
  return {rot, R};
}

TEST(ChgnetTorch, DirectHeadsRotateWithTheStructureAndTheirForcesSumToZero) {
  trainer::ChgnetTorchOptions o;
  o.direct_heads = true;
  ChgnetTorchModel<double> model(io::read_potential_file(kPotential), o);
  const auto s = some_structures()[1];  // licoo2_triclinic: 24 atoms, triclinic
  const auto [r, R] = rotated(s);
  const auto a = model.forward(trainer::make_chgnet_batch({s}, model.cutoff(), model.bond_cutoff()), kAll);
  const auto b = model.forward(trainer::make_chgnet_batch({r}, model.cutoff(), model.bond_cutoff()), kAll);
  ASSERT_EQ(a.forces.sizes(), (std::vector<std::int64_t>{24, 3}));
  ASSERT_EQ(a.virials.sizes(), (std::vector<std::int64_t>{1, 3, 3}));
  EXPECT_GT(values(a.forces.abs().max()).at(0), 1e-3);  // not trivially zero
  EXPECT_GT(values(a.virials.abs().max()).at(0), 1e-3);
  EXPECT_LE(rel_dev(values(b.forces), values(a.forces.mm(R.t()))), 1e-12);
  EXPECT_LE(rel_dev(values(b.virials[0]), values(R.mm(a.virials[0]).mm(R.t()))), 1e-12);
  EXPECT_LE(rel_dev(values(a.virials[0]), values(a.virials[0].t())), 1e-15);  // symmetric
  EXPECT_LE(values(a.forces.sum(0).abs().max()).at(0), 1e-12 * values(a.forces.abs().max()).at(0) * 24);
  EXPECT_NEAR(a.energy.item<double>(), b.energy.item<double>(), 1e-10 * std::abs(a.energy.item<double>()));
  // The same energy as without the heads: they replace only forces and virials.
  ChgnetTorchModel<double> plain(io::read_potential_file(kPotential));
  const auto c = plain.forward(trainer::make_chgnet_batch({s}, plain.cutoff(), plain.bond_cutoff()),
                               {false, false, false});
  EXPECT_EQ(a.energy.item<double>(), c.energy.item<double>());
  // A structure without a cell has no stress.
  auto open = s;
  open.cell.reset();
  open.pbc = {false, false, false};
  const auto d = model.forward(trainer::make_chgnet_batch({open}, model.cutoff(), model.bond_cutoff()), kAll);
  EXPECT_EQ(values(d.virials.abs().max()).at(0), 0.0);
}

TEST(ChgnetTorch, DirectHeadsTrainWithoutSecondDerivativesAndAreSaved) {
  trainer::ChgnetTorchOptions o;
  o.direct_heads = true;
  o.head_hidden = 7;
  ChgnetTorchModel<double> model(io::read_potential_file(kPotential), o);
  const auto& named = model.named_parameters();
  ASSERT_EQ(named[named.size() - 8].first, "force_head.layers.0.weight");
  EXPECT_EQ(named[named.size() - 8].second.sizes(), (std::vector<std::int64_t>{7, 64}));
  EXPECT_EQ(named.back().first, "stress_head.layers.2.bias");
  EXPECT_EQ(named.back().second.sizes(), (std::vector<std::int64_t>{6}));
  const auto s = some_structures()[2];
  const auto b = trainer::make_chgnet_batch({s}, model.cutoff(), model.bond_cutoff());
  const auto out = model.forward(b, kAll);
  // No create_graph: the heads are ordinary outputs, so one backward reaches every weight.
  const auto loss = out.energy.sum() + out.forces.pow(2).sum() + out.virials.pow(2).sum();
  const auto grads = torch::autograd::grad({loss}, model.parameters(), {}, false, false, true);
  for (const auto* name :
       {"force_head.layers.0.weight", "stress_head.layers.2.weight", "bond_embedding.weight",
        "bond_conv_layers.2.mlp_out.layers.1.weight", "atom_conv_layers.3.mlp_out.layers.1.weight"}) {
    std::size_t k = 0;
    while (named[k].first != name) {
      ++k;
    }
    ASSERT_TRUE(grads[k].defined()) << name;
    EXPECT_GT(grads[k].abs().max().item<double>(), 0.0) << name;
  }
  // Saved with the rest; reloaded, they give the same forces; the core ignores them.
  const auto path = temp_path("heads.safetensors");
  model.save(path);
  const auto file = io::read_potential_file(path);
  EXPECT_TRUE(file.contains("force_head.layers.2.weight") && file.contains("stress_head.layers.0.bias"));
  ChgnetTorchModel<double> again(file, o);
  const auto out2 = again.forward(b, kAll);
  EXPECT_TRUE(torch::equal(out.forces, out2.forces));
  EXPECT_TRUE(torch::equal(out.virials, out2.virials));
  models::ChgnetModel<double> core(file);
  EXPECT_NEAR(core_outputs(core, s).energy, out.energy.item<double>(),
              1e-10 * std::abs(out.energy.item<double>()));
  // Without direct_heads the saved heads are left alone: not parameters, saved as read.
  ChgnetTorchModel<double> no_heads(file);
  EXPECT_EQ(no_heads.named_parameters().size() + 8, named.size());
  EXPECT_TRUE(no_heads.to_potential_file().contains("force_head.layers.0.bias"));
  fs::remove(path);
}

}  // namespace
}  // namespace fastmlip::test
