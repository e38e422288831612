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
//  * float32 agrees with float64; second derivatives through the basis frequencies (a loss on
//    dE/dfrequency) against finite differences.
//  * Direct heads (FastCHGNet): forces rotate as vectors and sum to zero, virials as tensors;
//    one backward without create_graph reaches every weight; saved, reloaded, ignored by the core.
//  * Export: save() writes the file format; load + save is the identity; the core reads an
//    exported, fine-tuned model and gives the trainer model's energy; one optimiser step
//    changes the weights and the export carries the change.
//  * Fresh models (make_chgnet_potential): chgnet 0.3.0's tensors and hyperparameters by
//    default, torch's default initialisation statistics, valid files the core loads and agrees
//    with, one file per seed, and bad hyperparameters named (the odd-width model above is one).
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

#include "../models/chgnet_fixtures.hpp"
#include "../models/chgnet_test_util.hpp"
#include "io/potential_file.hpp"
#include "models/chgnet.hpp"
#include "models/chgnet/chgnet_geometry.hpp"
#include "models/device.hpp"

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
  for (const auto& name : chgnet_fixtures::fixture_names()) {
    const auto c =
        chgnet_fixtures::structure_of(chgnet_fixtures::read_json(kFixtures + "/" + name + ".json"));
    trainer::ChgnetStructure s;
    s.cell = c.lattice;
    s.positions = c.positions;
    s.atomic_numbers = c.numbers;
    s.pbc = c.pbc;
    out.emplace_back(name, s);
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
ChgnetOutputs core_outputs(models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double>& core,
                           const trainer::ChgnetStructure& s) {
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
  models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> core(file);
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

/// The trainer's batch enumerates short edges and angles on its own (on the prefetch thread,
/// without Kokkos); it must be the core geometry stage's enumeration, in the same order, offset
/// per structure, or the trainer would train another model than the pair style runs.
TEST(ChgnetTorch, BatchHasTheCoreGeometrysShortEdgesAndAngles) {
  ChgnetTorchModel<double> model(io::read_potential_file(kPotential));
  auto all = some_structures();
  all.push_back(small_cell());
  const auto b = trainer::make_chgnet_batch(all, model.cutoff(), model.bond_cutoff());
  const auto ints = [](const torch::Tensor& t) {
    const auto c = t.contiguous();
    return std::vector<std::int64_t>(c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel());
  };
  const auto short_edge = ints(b.short_edge), short_reverse = ints(b.short_reverse),
             angle_a = ints(b.angle_a), angle_b = ints(b.angle_b), angle_c = ints(b.angle_center);
  std::int64_t node0 = 0, edge0 = 0, short0 = 0, angle0 = 0;
  for (std::size_t gi = 0; gi < all.size(); ++gi) {
    const auto& s = all[gi];
    const auto g =
        models::make_structure_graph<double>(s.positions, s.atomic_numbers, s.cell ? s.cell->data() : nullptr,
                                             s.pbc, model.cutoff(), model.bond_cutoff());
    using Host = Kokkos::DefaultHostExecutionSpace;
    const auto view = g.view();
    models::chgnet::Geometry<Host, double> geo;
    models::chgnet::compute_chgnet_geometry<Host, double>(view, view.slot_start, view.reverse_slot, "test",
                                                          geo);
    ASSERT_LE(short0 + geo.num_short, static_cast<std::int64_t>(short_edge.size())) << gi;
    ASSERT_LE(angle0 + geo.num_angles, static_cast<std::int64_t>(angle_a.size())) << gi;
    for (int q = 0; q < geo.num_short; ++q) {
      ASSERT_EQ(short_edge[short0 + q], edge0 + geo.short_edge(q)) << gi << " short " << q;
      ASSERT_EQ(short_reverse[short0 + q], short0 + geo.short_reverse(q)) << gi << " short " << q;
    }
    for (int q = 0; q < geo.num_angles; ++q) {
      ASSERT_EQ(angle_a[angle0 + q], short0 + geo.angle_a(q)) << gi << " angle " << q;
      ASSERT_EQ(angle_b[angle0 + q], short0 + geo.angle_b(q)) << gi << " angle " << q;
      ASSERT_EQ(angle_c[angle0 + q], node0 + geo.angle_c(q)) << gi << " angle " << q;
    }
    node0 += g.n_atoms;
    edge0 += static_cast<std::int64_t>(g.center.size());
    short0 += geo.num_short;
    angle0 += geo.num_angles;
  }
  EXPECT_EQ(short0, static_cast<std::int64_t>(short_edge.size()));
  EXPECT_EQ(angle0, static_cast<std::int64_t>(angle_a.size()));
  EXPECT_GT(angle0, 0);
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

/// Every element's AtomRef energy, so that any test structure is accepted.
trainer::ChgnetConfig with_all_e0s(trainer::ChgnetConfig c) {
  for (int z = 1; z <= c.max_num_elements; ++z) {
    c.atomic_numbers.push_back(z);
    c.e0s.push_back(-3.0 - 0.01 * z);
  }
  return c;
}

/// Odd, unequal widths (so a transposed or mis-split weight cannot go unnoticed), 3
/// convolutions, output-layer biases, hidden layers of different widths and none in the angle
/// update.
trainer::ChgnetConfig odd_config(std::uint64_t seed) {
  trainer::ChgnetConfig c;
  c.atom_fea_dim = 5, c.bond_fea_dim = 7, c.angle_fea_dim = 3, c.num_radial = 5, c.num_angular = 7;
  c.n_conv = 3, c.atom_conv_hidden_dim = 3, c.bond_conv_hidden_dim = 4, c.angle_layer_hidden_dim = 0;
  c.mlp_hidden_dims = {5, 3};
  c.mlp_out_bias = true;
  c.seed = seed;
  return with_all_e0s(c);
}

/// A fresh model of odd_config with its layer norms and basis frequencies moved off their
/// initial values (ones, zeros, n pi, k), which would hide a swapped scale and shift or a
/// frequency read as harmonic: random norms and perturbed (non-harmonic) frequencies.
io::PotentialFile small_random_potential(std::uint64_t seed) {
  const auto fresh = trainer::make_chgnet_potential(odd_config(seed));
  io::PotentialFile f;
  f.metadata = fresh.metadata;
  auto gen = at::detail::createCPUGenerator(seed + 1);
  for (const auto& [name, t] : fresh.tensors()) {
    auto v = fresh.values<double>(name, t.shape);
    const bool norm = name.find(".bn") != std::string::npos || name.rfind("readout_norm.", 0) == 0;
    if (norm) {
      const auto noise = torch::randn({static_cast<std::int64_t>(v.size())}, gen, torch::kFloat64) * 0.1;
      for (std::size_t i = 0; i < v.size(); ++i) {
        v[i] += noise[static_cast<std::int64_t>(i)].item<double>();
      }
    } else if (name.find("frequencies") != std::string::npos) {
      const bool bessel = name.rfind("bond_basis", 0) == 0;
      for (std::size_t i = 0; i < v.size(); ++i) {
        const double n = static_cast<double>(i + 1);
        v[i] *= bessel ? 1.0 + 0.01 * n : 1.0 + 0.03 * n;
      }
    }
    f.add<double>(name, t.shape, v);
  }
  return f;
}

/// Parity with the core on four structures (images of the atom itself, triclinic, rattled, no
/// angles): energy, forces and magnetic moments to 1e-10 relative.
void expect_core_parity(models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double>& core,
                        ChgnetTorchModel<double>& model) {
  for (const auto& s : some_structures()) {
    const auto ref = core_outputs(core, s);
    const auto out =
        model.forward(trainer::make_chgnet_batch({s}, model.cutoff(), model.bond_cutoff()), kAll);
    const double scale = std::max(1.0, std::abs(ref.energy));
    EXPECT_LE(std::abs(out.energy.item<double>() - ref.energy) / scale, 1e-10);
    EXPECT_LE(rel_dev(values(out.forces), ref.forces), 1e-10);
    EXPECT_LE(rel_dev(values(out.magmom), ref.magmoms), 1e-10);
  }
}

TEST(ChgnetTorch, SmallRandomOddSizedModel) {
  const auto file = small_random_potential(11);
  models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> core(file);
  ChgnetTorchModel<double> model(file);
  expect_core_parity(core, model);
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

// The bases read their frequencies in place and carry a tangent on them: a loss on dE/dw (here
// a . dE/dw for one frequency tensor w) differentiates into every frequency tensor w', the mixed
// second derivative d2E/dw dw', against central differences of dE/dw. The small random model:
// its frequencies are off the harmonic values, as a trained model's are.
TEST(ChgnetTorch, SecondDerivativesThroughTheBasisFrequenciesMatchFiniteDifferences) {
  ChgnetTorchModel<double> model(small_random_potential(5));
  const auto b = trainer::make_chgnet_batch({small_cell()}, model.cutoff(), model.bond_cutoff());
  ASSERT_GT(b.angle_a.size(0), 0);
  std::vector<std::pair<std::string, torch::Tensor>> freqs;
  for (const auto& [name, p] : model.named_parameters()) {
    if (name.find("frequencies") != std::string::npos) {
      freqs.emplace_back(name, p);
    }
  }
  ASSERT_EQ(freqs.size(), 3u);  // the two Bessel bases and the Fourier basis
  const auto energy = [&] { return model.forward(b, {false, false, false}).energy.sum(); };
  int checked = 0;
  for (const auto& [name, w] : freqs) {
    const auto a = torch::linspace(0.5, -1.0, w.numel(), torch::kFloat64);
    const auto dw = torch::autograd::grad({energy()}, {w}, {}, true, true)[0];
    std::vector<torch::Tensor> others;
    for (const auto& f : freqs) {
      others.push_back(f.second);
    }
    const auto hessian_a = torch::autograd::grad({(a * dw).sum()}, others);
    torch::NoGradGuard no_grad;
    for (std::size_t o = 0; o < freqs.size(); ++o) {
      auto flat = freqs[o].second.view(-1);
      for (const std::int64_t i : {std::int64_t{0}, flat.numel() - 1}) {
        const double w0 = flat[i].item<double>(), h = 1e-5 * std::max(1.0, std::abs(w0));
        const auto a_dw = [&] {
          torch::AutoGradMode on(true);
          return (a * torch::autograd::grad({energy()}, {w})[0]).sum().item<double>();
        };
        flat[i] = w0 + h;
        const double lp = a_dw();
        flat[i] = w0 - h;
        const double lm = a_dw();
        flat[i] = w0;
        const double fd = (lp - lm) / (2 * h), ag = hessian_a[o].view(-1)[i].item<double>();
        EXPECT_NEAR(ag, fd, 1e-6 * (std::abs(ag) + std::abs(fd)) + 1e-9)
            << "d(a . dE/d " << name << ")/d " << freqs[o].first << "[" << i << "]";
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 18);
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
  models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> core(tuned);
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
  models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> core(file);
  EXPECT_NEAR(core_outputs(core, s).energy, out.energy.item<double>(),
              1e-10 * std::abs(out.energy.item<double>()));
  // Without direct_heads the saved heads are left alone: not parameters, saved as read.
  ChgnetTorchModel<double> no_heads(file);
  EXPECT_EQ(no_heads.named_parameters().size() + 8, named.size());
  EXPECT_TRUE(no_heads.to_potential_file().contains("force_head.layers.0.bias"));
  fs::remove(path);
}

}  // namespace
/// A fresh model (make_chgnet_potential), chgnet 0.3.0's defaults and odd widths: written and
/// read back (the file's validation), the core loads it and agrees with the trainer's model.
TEST(ChgnetFresh, PassesValidationAndTheCoreAgrees) {
  for (const auto& config : {with_all_e0s(trainer::ChgnetConfig{}), odd_config(5)}) {
    const auto path = temp_path("fresh.safetensors");
    io::write_potential_file(path, trainer::make_chgnet_potential(config));
    const auto file = io::read_potential_file(path);
    fs::remove(path);
    models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> core(file);
    ChgnetTorchModel<double> model(file);
    EXPECT_DOUBLE_EQ(model.cutoff(), config.atom_graph_cutoff);
    EXPECT_DOUBLE_EQ(model.bond_cutoff(), config.bond_graph_cutoff);
    expect_core_parity(core, model);
  }
}

/// The defaults are chgnet 0.3.0: the shipped model's tensors (names and shapes) and
/// hyperparameters; the weights are drawn as torch's defaults draw them.
TEST(ChgnetFresh, ArchitectureAndInitialisation) {
  trainer::ChgnetConfig config;
  config.atomic_numbers = {3, 8, 25};
  config.e0s = {-1.9, -4.9, -8.4};
  const auto fresh = trainer::make_chgnet_potential(config);
  const auto shipped = io::read_potential_file(kPotential);
  ASSERT_EQ(fresh.size(), shipped.size());
  for (const auto& [name, t] : shipped.tensors()) {
    ASSERT_TRUE(fresh.contains(name)) << name;
    EXPECT_EQ(fresh.get(name).shape, t.shape) << name;
  }
  auto hp = shipped.metadata["hyperparameters"];
  auto fresh_hp = fresh.metadata["hyperparameters"];
  hp.erase("version"), fresh_hp.erase("version");
  EXPECT_EQ(fresh_hp, hp);
  EXPECT_EQ(fresh.metadata["cutoffs"], shipped.metadata["cutoffs"]);
  EXPECT_EQ(fresh.species().size(), 94u);

  int linears = 0;
  for (const auto& [name, t] : fresh.tensors()) {
    const auto v = fresh.values<double>(name, t.shape);
    const bool norm = name.find(".bn") != std::string::npos || name.rfind("readout_norm.", 0) == 0;
    if (norm) {
      const double want = name.size() > 7 && name.substr(name.size() - 7) == ".weight" ? 1.0 : 0.0;
      EXPECT_TRUE(std::all_of(v.begin(), v.end(), [&](double x) { return x == want; })) << name;
    } else if (name.find("frequencies") != std::string::npos || name.rfind("composition", 0) == 0 ||
               name.rfind("atom_embedding", 0) == 0) {
      continue;  // below
    } else {
      // nn.Linear: weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in the weight's columns.
      const std::string weight = name.substr(0, name.rfind('.')) + ".weight";
      const double bound = 1.0 / std::sqrt(static_cast<double>(fresh.get(weight).shape[1]));
      double lo = bound, hi = -bound, sum = 0.0, sq = 0.0;
      for (double x : v) {
        lo = std::min(lo, x), hi = std::max(hi, x), sum += x, sq += x * x;
      }
      EXPECT_GE(lo, -bound) << name;
      EXPECT_LE(hi, bound) << name;
      if (v.size() >= 1000) {
        // A uniform sample fills its range; its variance is bound^2 / 3 (4096 samples: 3%).
        ++linears;
        EXPECT_LT(lo, -0.95 * bound) << name;
        EXPECT_GT(hi, 0.95 * bound) << name;
        const double n = static_cast<double>(v.size()), var = sq / n - (sum / n) * (sum / n);
        EXPECT_NEAR(var / (bound * bound / 3), 1.0, 0.1) << name;
        EXPECT_LT(std::abs(sum / n), 0.1 * bound) << name;
      }
    }
  }
  EXPECT_GE(linears, 30);
  // nn.Embedding: N(0, 1).
  const auto emb = fresh.values<double>("atom_embedding.embedding.weight", {94, 64});
  double sum = 0.0, sq = 0.0;
  for (double x : emb) {
    sum += x, sq += x * x;
  }
  EXPECT_NEAR(sum / emb.size(), 0.0, 0.05);
  EXPECT_NEAR(sq / emb.size(), 1.0, 0.06);
  for (const char* name : {"bond_basis_expansion.rbf_expansion_ag.frequencies",
                           "bond_basis_expansion.rbf_expansion_bg.frequencies"}) {
    const auto fr = fresh.values<double>(name, {31});
    for (int n = 1; n <= 31; ++n) {
      EXPECT_DOUBLE_EQ(fr[n - 1], n * M_PI) << name;
    }
  }
  const auto fk = fresh.values<double>("angle_basis_expansion.fourier_expansion.frequencies", {15});
  for (int k = 1; k <= 15; ++k) {
    EXPECT_EQ(fk[k - 1], k);
  }
  // AtomRef: the given energies, zero (an element the core refuses) elsewhere.
  const auto ref = fresh.values<double>("composition_model.fc.weight", {1, 94});
  for (int z = 1; z <= 94; ++z) {
    const double want = z == 3 ? -1.9 : z == 8 ? -4.9 : z == 25 ? -8.4 : 0.0;
    EXPECT_EQ(ref[z - 1], want) << z;
  }
  EXPECT_EQ(fresh.metadata["provenance"]["seed"], config.seed);
}

TEST(ChgnetFresh, TheSeedDecidesTheFile) {
  auto config = odd_config(7);
  const auto a = temp_path("seed_a.safetensors"), b = temp_path("seed_b.safetensors");
  io::write_potential_file(a, trainer::make_chgnet_potential(config));
  io::write_potential_file(b, trainer::make_chgnet_potential(config));
  const auto first = bytes_of(a);
  EXPECT_FALSE(first.empty());
  EXPECT_EQ(first, bytes_of(b));
  config.seed = 8;
  io::write_potential_file(b, trainer::make_chgnet_potential(config));
  EXPECT_NE(first, bytes_of(b));
  fs::remove(a), fs::remove(b);
}

TEST(ChgnetFresh, BadHyperparametersNameTheField) {
  using Change = std::function<void(trainer::ChgnetConfig&)>;
  const std::vector<std::pair<std::string, Change>> cases = {
      {"atom_fea_dim", [](auto& c) { c.atom_fea_dim = 0; }},
      {"bond_fea_dim", [](auto& c) { c.bond_fea_dim = -1; }},
      {"angle_fea_dim", [](auto& c) { c.angle_fea_dim = 0; }},
      {"num_radial", [](auto& c) { c.num_radial = 0; }},
      {"num_angular", [](auto& c) { c.num_angular = 8; }},
      {"n_conv", [](auto& c) { c.n_conv = 1; }},
      {"atom_conv_hidden_dim", [](auto& c) { c.atom_conv_hidden_dim = -2; }},
      {"mlp_hidden_dims", [](auto& c) { c.mlp_hidden_dims = {}; }},
      {"mlp_hidden_dims", [](auto& c) { c.mlp_hidden_dims = {64, 0}; }},
      {"cutoff_coeff", [](auto& c) { c.cutoff_coeff = 0; }},
      {"bond_graph_cutoff", [](auto& c) { c.bond_graph_cutoff = 6.5; }},
      {"atom_graph_cutoff", [](auto& c) { c.atom_graph_cutoff = 0.0; }},
      {"max_num_elements", [](auto& c) { c.max_num_elements = 0; }},
      {"atomic_numbers", [](auto& c) { c.max_num_elements = 20; }},
      {"e0s", [](auto& c) { c.e0s.pop_back(); }},
      {"e0s", [](auto& c) { c.e0s[0] = std::nan(""); }},
      {"e0s", [](auto& c) { c.atomic_numbers[1] = c.atomic_numbers[0]; }},
  };
  for (const auto& [field, change] : cases) {
    trainer::ChgnetConfig c;
    c.atomic_numbers = {3, 8, 25};
    c.e0s = {-1.9, -4.9, -8.4};
    change(c);
    std::string message;
    try {
      trainer::make_chgnet_potential(c);
    } catch (const InputError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find(field + " "), std::string::npos) << field << ": " << message;
  }
}

// ---- the dense family as LibTorch ops, and the model on a GPU (issue 23) ---------------------

namespace {

/// Energies, forces, virials, magmoms and a force loss's weight gradients (the double backward)
/// of `batch` from two models of one file, within `tol` relative.
template <class A, class B>
void expect_same_model(A& a, B& b, const ChgnetBatch& batch, double tol, const std::string& what) {
  const ChgnetForwardOptions train{true, true, true};
  const auto oa = a.forward(batch, train), ob = b.forward(batch, train);
  EXPECT_LE(rel_dev(values(ob.energy.cpu()), values(oa.energy.cpu())), tol) << what << " energy";
  EXPECT_LE(rel_dev(values(ob.forces.cpu()), values(oa.forces.cpu())), tol) << what << " forces";
  EXPECT_LE(rel_dev(values(ob.virials.cpu()), values(oa.virials.cpu())), tol) << what << " virials";
  EXPECT_LE(rel_dev(values(ob.magmom.cpu()), values(oa.magmom.cpu())), tol) << what << " magmoms";
  const auto loss = [](const trainer::ChgnetOutput& o) {
    return (o.forces * o.forces).sum() + 0.1 * (o.virials * o.virials).sum() + o.energy.sum();
  };
  const auto ga =
      torch::autograd::grad(torch::autograd::variable_list{loss(oa)}, a.parameters(), {}, false, false, true);
  const auto gb =
      torch::autograd::grad(torch::autograd::variable_list{loss(ob)}, b.parameters(), {}, false, false, true);
  ASSERT_EQ(ga.size(), gb.size());
  for (std::size_t k = 0; k < ga.size(); ++k) {
    if (!ga[k].defined() || !gb[k].defined()) {
      EXPECT_EQ(ga[k].defined(), gb[k].defined()) << what << ": " << a.named_parameters()[k].first;
      continue;
    }
    EXPECT_LE(rel_dev(values(gb[k].cpu()), values(ga[k].cpu())), tol)
        << what << ": force-loss gradient of " << a.named_parameters()[k].first;
  }
}

std::vector<trainer::ChgnetStructure> all_structures() {
  std::vector<trainer::ChgnetStructure> all;
  for (const auto& s : some_structures()) {
    all.push_back(s);
  }
  return all;
}

// The GPU's arithmetic for the dense layers, LayerNorms and gated MLPs (LibTorch's ops), on the
// CPU: the same model as the core's kernels, with and without chgnet 0.3.0's LayerNorms.
TEST(ChgnetTorch, TorchDenseOpsGiveTheKernelsModel) {
  for (const std::string& path : {kPotential, kFixtures + "/chgnet-0.2.0.safetensors"}) {
    const auto file = io::read_potential_file(path);
    trainer::ChgnetTorchOptions torch_ops;
    torch_ops.torch_dense_ops = true;
    ChgnetTorchModel<double> kernels(file), ops(file, torch_ops);
    const auto batch = trainer::make_chgnet_batch(all_structures(), kernels.cutoff(), kernels.bond_cutoff());
    expect_same_model(kernels, ops, batch, 1e-11, path);
  }
}

TEST(ChgnetTorchDevice, OnTheGpuTheModelGivesTheCpusLossAndGradients) {
  const torch::Device gpu(torch::kCUDA, 0);
  if (const std::string problem = trainer::device_problem(gpu); !problem.empty()) {
    GTEST_SKIP() << problem;
  }
  trainer::ChgnetTorchOptions on_gpu;
  on_gpu.device = gpu;
  for (const std::string& path : {kPotential, kFixtures + "/chgnet-0.2.0.safetensors"}) {
    const auto file = io::read_potential_file(path);
    ChgnetTorchModel<double> c64(file), g64(file, on_gpu);
    EXPECT_EQ(g64.device(), gpu);
    const auto batch = trainer::make_chgnet_batch(all_structures(), c64.cutoff(), c64.bond_cutoff());
    expect_same_model(c64, g64, batch, 1e-10, path + " (float64)");
    ChgnetTorchModel<float> c32(file), g32(file, on_gpu);
    expect_same_model(c32, g32, batch, 1e-5, path + " (float32)");
  }
}

}  // namespace

}  // namespace fastmlip::test
