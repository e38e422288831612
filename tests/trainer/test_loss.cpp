// SPDX-License-Identifier: MIT
// The trainer's losses (trainer/train/loss.hpp):
//  * against mace-torch 0.3.13's loss modules on a small batch, value and gradients with
//    respect to every prediction (tests/reference/make_trainer_loss_fixtures.py writes the
//    committed fixture), to 1e-12 relative;
//  * against values computed by hand on one- and two-graph batches;
//  * targets from labelled configurations (absent labels weigh nothing), the data-parallel
//    reduction (two half batches give the full batch's gradient), and the errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "train/loss.hpp"

namespace fastmlip::test {
namespace {

using trainer::train::compute_loss;
using trainer::train::LossConfig;
using trainer::train::LossKind;
using trainer::train::LossPredictions;
using trainer::train::LossTargets;

const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

torch::Tensor from_json(const nlohmann::json& j, std::vector<std::int64_t> shape) {
  const std::vector<double> v = j.get<std::vector<double>>();
  return torch::tensor(v, kF64).reshape(shape);
}

void expect_close(const torch::Tensor& a, const torch::Tensor& b, double rel, const std::string& what) {
  const double scale = std::max(1e-30, b.abs().max().item<double>());
  EXPECT_LE((a - b).abs().max().item<double>(), rel * scale) << what;
}

TEST(TrainerLoss, MatchesMaceTorch) {
  std::ifstream in(std::string(FASTMLIP_TRAINER_FIXTURES) + "/loss.json");
  ASSERT_TRUE(in) << "missing fixture loss.json";
  const auto j = nlohmann::json::parse(in);
  const auto na = j["num_atoms"].get<std::vector<std::int64_t>>();
  const std::int64_t g = static_cast<std::int64_t>(na.size());
  std::int64_t n = 0;
  std::vector<std::int64_t> batch;
  for (std::int64_t k = 0; k < g; ++k) {
    n += na[static_cast<std::size_t>(k)];
    batch.insert(batch.end(), static_cast<std::size_t>(na[static_cast<std::size_t>(k)]), k);
  }
  LossTargets ref;
  const auto& r = j["ref"];
  ref.energy = from_json(r["energy"], {g});
  ref.forces = from_json(r["forces"], {n, 3});
  ref.stress = from_json(r["stress"], {g, 3, 3});
  ref.virials = from_json(r["virials"], {g, 3, 3});
  ref.weight = from_json(r["weight"], {g});
  ref.energy_weight = from_json(r["energy_weight"], {g});
  ref.forces_weight = from_json(r["forces_weight"], {g});
  ref.stress_weight = from_json(r["stress_weight"], {g});
  ref.virials_weight = from_json(r["virials_weight"], {g});
  ref.num_atoms = torch::tensor(na, kF64.dtype(torch::kInt64)).to(torch::kFloat64);
  ref.batch = torch::tensor(batch, torch::TensorOptions().dtype(torch::kInt64));
  const auto& w = j["weights"];
  for (const auto& [name, expect] : j["losses"].items()) {
    LossConfig c;
    c.energy_weight = w["energy_weight"];
    c.forces_weight = w["forces_weight"];
    c.stress_weight = w["stress_weight"];
    c.virials_weight = w["virials_weight"];
    if (name.rfind("huber", 0) == 0) {
      c.kind = LossKind::kHuber;
      c.huber_delta = std::stod(name.substr(6));
    } else {
      c.kind = trainer::train::parse_loss_kind(name);
    }
    const auto& p = j["pred"];
    LossPredictions pred;
    pred.energy = from_json(p["energy"], {g}).requires_grad_(true);
    pred.forces = from_json(p["forces"], {n, 3}).requires_grad_(true);
    pred.stress = from_json(p["stress"], {g, 3, 3}).requires_grad_(true);
    pred.virials = from_json(p["virials"], {g, 3, 3}).requires_grad_(true);
    const auto terms = compute_loss(c, pred, ref);
    const double v = terms.total.item<double>();
    EXPECT_NEAR(v, expect["value"].get<double>(), 1e-12 * std::abs(v)) << name;
    terms.total.backward();
    const auto& gr = expect["grad"];
    auto grad_or_zero = [](const torch::Tensor& t) {
      return t.grad().defined() ? t.grad() : torch::zeros_like(t);
    };
    expect_close(grad_or_zero(pred.energy), from_json(gr["energy"], {g}), 1e-12, name + " dE");
    expect_close(grad_or_zero(pred.forces), from_json(gr["forces"], {n, 3}), 1e-12, name + " dF");
    expect_close(grad_or_zero(pred.stress), from_json(gr["stress"], {g, 3, 3}), 1e-12, name + " dS");
    expect_close(grad_or_zero(pred.virials), from_json(gr["virials"], {g, 3, 3}), 1e-12, name + " dV");
  }
}

/// Two graphs (1 and 2 atoms) with labels built from configurations.
std::vector<trainer::data::Config> two_configs() {
  trainer::data::Config a, b;
  a.atomic_numbers = {29};
  a.positions = {0, 0, 0};
  a.energy = -1.0;
  a.forces = {0.5, 0.0, 0.0};
  a.weight = 2.0;
  b.atomic_numbers = {29, 28};
  b.positions = {0, 0, 0, 1, 0, 0};
  b.energy = 4.0;
  b.forces = {0, 0, 0, 0, 0, 1.0};
  b.forces_weight = 0.5;
  b.virials = std::array<double, 9>{2, 0, 0, 0, 0, 0, 0, 0, 0};
  return {a, b};
}

TEST(TrainerLoss, HandComputedWeighted) {
  const auto cs = two_configs();
  const auto ref = trainer::train::make_loss_targets({&cs[0], &cs[1]}, torch::kFloat64);
  LossPredictions pred;
  pred.energy = torch::tensor({-1.5, 3.0}, kF64);  // errors 0.5 (1 atom), 1.0 (2 atoms)
  pred.forces = torch::zeros({3, 3}, kF64);
  pred.virials = torch::zeros({2, 3, 3}, kF64);
  LossConfig c;  // energy 1, forces 100, virials 1
  const auto t = compute_loss(c, pred, ref);
  // energy: mean(2 * 0.5^2, 1 * (1/2)^2) = (0.5 + 0.25) / 2
  EXPECT_DOUBLE_EQ(t.energy.item<double>(), 0.375);
  // forces: (2 * 0.25 + 0.5 * 1) / 9 entries, times 100
  EXPECT_DOUBLE_EQ(t.forces.item<double>(), 100.0 * 1.0 / 9.0);
  EXPECT_DOUBLE_EQ(t.total.item<double>(), 0.375 + 100.0 / 9.0);
  EXPECT_FALSE(t.stress.defined());
  c.kind = LossKind::kVirials;
  // virials: graph 0 has none (weight 0); graph 1: (2/2)^2 / 18 entries
  EXPECT_DOUBLE_EQ(compute_loss(c, pred, ref).virials.item<double>(), 1.0 / 18.0);
  c.kind = LossKind::kStress;
  EXPECT_THROW(compute_loss(c, pred, ref), InputError);  // no predicted stress
}

TEST(TrainerLoss, HandComputedHuber) {
  const auto cs = two_configs();
  const auto ref = trainer::train::make_loss_targets({&cs[0], &cs[1]}, torch::kFloat64);
  LossPredictions pred;
  pred.energy = torch::tensor({-1.05, 4.0}, kF64);  // per-atom errors 0.05 and 0
  pred.forces = ref.forces.clone();
  pred.forces[0][0] = 0.0;  // error 0.5 on one of 9 components
  LossConfig c;
  c.kind = LossKind::kHuber;
  c.huber_delta = 0.1;
  const auto t = compute_loss(c, pred, ref);
  EXPECT_NEAR(t.energy.item<double>(), 0.5 * 0.05 * 0.05 / 2.0, 1e-17);           // quadratic branch
  EXPECT_NEAR(t.forces.item<double>(), 100.0 * 0.1 * (0.5 - 0.05) / 9.0, 1e-14);  // linear branch
  EXPECT_FALSE(t.stress.defined());  // no predicted stress: the term is left out
}

TEST(TrainerLoss, HandComputedMagmomTerm) {
  auto cs = two_configs();
  cs[0].magmoms = {2.0};  // graph 0 (weight 2) has a magmom; graph 1 has none
  const auto ref = trainer::train::make_loss_targets({&cs[0], &cs[1]}, torch::kFloat64);
  EXPECT_EQ(ref.num_magmom_atoms, 1);
  LossPredictions pred;
  pred.energy = ref.energy.clone();
  pred.forces = ref.forces.clone();
  // magmom_weight 0.1 by default, chgnet's mag_loss_ratio.
  LossConfig c;
  EXPECT_FALSE(compute_loss(c, pred, ref).magmoms.defined());  // a model without magmoms: no term
  pred.magmoms = torch::tensor({1.5, 9.0, -9.0}, kF64).requires_grad_(true);
  // MSE over the one labelled atom: 0.1 * 2 * (1.5 - 2)^2 / 1; the unlabelled atoms count nothing.
  const auto t = compute_loss(c, pred, ref);
  EXPECT_DOUBLE_EQ(t.magmoms.item<double>(), 0.05);
  EXPECT_DOUBLE_EQ(t.total.item<double>(), 0.05);
  const auto g = torch::autograd::grad({t.total}, {pred.magmoms})[0];
  EXPECT_DOUBLE_EQ(g[0].item<double>(), 0.1 * 2 * 2 * (1.5 - 2.0));
  EXPECT_EQ(g[1].item<double>(), 0.0);
  // Huber (delta 0.1, linear branch), without the per-config weight, as the other Huber terms.
  c.kind = LossKind::kHuber;
  c.huber_delta = 0.1;
  EXPECT_NEAR(compute_loss(c, pred, ref).magmoms.item<double>(), 0.1 * 0.1 * (0.5 - 0.05), 1e-15);
  // Data parallel: local sum * world / global count.
  c.kind = LossKind::kWeighted;
  trainer::train::LossReduction r{2, 3, 2, 4};  // graphs, atoms, ranks, magmom atoms
  EXPECT_DOUBLE_EQ(compute_loss(c, pred, ref, r).magmoms.item<double>(), 0.1 * 0.5 * 2.0 / 4.0);
  r.global_num_magmom_atoms = 0;  // a caller that forgot to count them
  EXPECT_THROW(compute_loss(c, pred, ref, r), InputError);
  // A batch without magmom labels adds 0; a zero weight leaves the term out.
  const auto none = trainer::train::make_loss_targets({&cs[1]}, torch::kFloat64);
  LossPredictions p1{none.energy, none.forces, {}, {}, torch::ones({2}, kF64)};
  EXPECT_EQ(compute_loss(c, p1, none).magmoms.item<double>(), 0.0);
  c.magmom_weight = 0.0;
  EXPECT_FALSE(compute_loss(c, pred, ref).magmoms.defined());
  // Magmoms for the wrong number of atoms are named.
  cs[0].magmoms = {1.0, 2.0};
  EXPECT_THROW(trainer::train::make_loss_targets({&cs[0]}, torch::kFloat64), InputError);
}

TEST(TrainerLoss, TargetsWeighAbsentLabelsZero) {
  const auto cs = two_configs();
  const auto t = trainer::train::make_loss_targets({&cs[0], &cs[1]}, torch::kFloat32);
  EXPECT_EQ(t.energy.scalar_type(), torch::kFloat32);
  EXPECT_EQ(t.stress_weight[0].item<float>(), 0.0f);
  EXPECT_EQ(t.stress_weight[1].item<float>(), 0.0f);
  EXPECT_EQ(t.virials_weight[0].item<float>(), 0.0f);
  EXPECT_EQ(t.virials_weight[1].item<float>(), 1.0f);
  EXPECT_EQ(t.weight[0].item<float>(), 2.0f);
  EXPECT_EQ(t.batch.sizes(), (std::vector<std::int64_t>{3}));
  EXPECT_EQ(t.batch[2].item<std::int64_t>(), 1);
}

TEST(TrainerLoss, DataParallelReductionGivesTheFullBatchGradient) {
  torch::manual_seed(3);
  trainer::data::Config a, b, c;
  for (auto* x : {&a, &b, &c}) {
    x->atomic_numbers = {29, 29};
    x->positions.assign(6, 0.0);
    x->energy = torch::randn({1}, kF64).item<double>();
    x->forces.assign(6, 0.3);
  }
  c.atomic_numbers = {29, 29, 28};
  c.positions.assign(9, 0.0);
  c.forces.assign(9, -0.2);
  for (const LossKind kind : {LossKind::kWeighted, LossKind::kHuber}) {
    LossConfig cfg;
    cfg.kind = kind;
    cfg.huber_delta = 0.2;
    auto grad_of = [&](const std::vector<const trainer::data::Config*>& cs,
                       const std::optional<trainer::train::LossReduction>& red) {
      const auto ref = trainer::train::make_loss_targets(cs, torch::kFloat64);
      LossPredictions p;
      p.energy = torch::full({static_cast<std::int64_t>(cs.size())}, 0.5, kF64).requires_grad_(true);
      p.forces = torch::zeros_like(ref.forces).requires_grad_(true);
      compute_loss(cfg, p, ref, red).total.backward();
      return std::make_pair(p.energy.grad(), p.forces.grad());
    };
    const auto full = grad_of({&a, &b, &c}, std::nullopt);
    const trainer::train::LossReduction red{3, 7, 2};
    const auto r0 = grad_of({&a}, red);
    const auto r1 = grad_of({&b, &c}, red);
    // allreduce_mean_gradients averages the ranks' gradients.
    expect_close(torch::cat({r0.first, r1.first}) / 2.0, full.first, 1e-15, "dE");
    expect_close(torch::cat({r0.second, r1.second}) / 2.0, full.second, 1e-15, "dF");
  }
}

}  // namespace
}  // namespace fastmlip::test
