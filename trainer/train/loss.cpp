// SPDX-License-Identifier: MIT
#include "train/loss.hpp"

#include "core/error.hpp"
#include "options.hpp"

namespace fastmlip::trainer::train {
namespace {

void require(const torch::Tensor& t, const char* name, const char* loss) {
  if (!t.defined()) {
    throw InputError(std::string("compute_loss: the ") + loss + " loss needs predicted " + name +
                     " (ask the model for them: --compute_stress for stress and virials)");
  }
}

void check_shape(const torch::Tensor& pred, const torch::Tensor& ref, const char* name) {
  if (pred.sizes() != ref.sizes()) {
    throw InputError(std::string("compute_loss: predicted ") + name + " have shape " +
                     c10::str(pred.sizes()) + " but the targets " + c10::str(ref.sizes()));
  }
}

/// mace-torch's reduce_loss: the mean, or with a reduction local_sum * world / global_count.
torch::Tensor reduce(const torch::Tensor& raw, const std::optional<LossReduction>& r, std::int64_t global) {
  if (!r) {
    return raw.mean();
  }
  return raw.sum() * (static_cast<double>(r->world_size) / static_cast<double>(global));
}

}  // namespace

LossKind parse_loss_kind(const std::string& name) {
  if (name == "weighted") {
    return LossKind::kWeighted;
  }
  if (name == "stress") {
    return LossKind::kStress;
  }
  if (name == "virials") {
    return LossKind::kVirials;
  }
  if (name == "huber") {
    return LossKind::kHuber;
  }
  throw InputError("loss: unknown loss '" + name + "'; allowed: weighted, stress, virials, huber");
}

LossConfig loss_config_from(const Options& options) {
  LossConfig c;
  c.kind = parse_loss_kind(options.get_string("loss"));
  c.energy_weight = options.get_float("energy_weight");
  c.forces_weight = options.get_float("forces_weight");
  c.stress_weight = options.get_float("stress_weight");
  c.virials_weight = options.get_float("virials_weight");
  c.huber_delta = options.get_float("huber_delta");
  c.magmom_weight = options.get_float("magmom_weight");
  return c;
}

LossTargets make_loss_targets(const std::vector<const data::Config*>& configs, torch::Dtype dtype,
                              torch::Device device) {
  const auto g = static_cast<std::int64_t>(configs.size());
  std::int64_t n = 0;
  for (const auto* c : configs) {
    n += static_cast<std::int64_t>(c->natoms());
  }
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  LossTargets t;
  t.energy = torch::zeros({g}, f64);
  t.forces = torch::zeros({n, 3}, f64);
  t.stress = torch::zeros({g, 3, 3}, f64);
  t.virials = torch::zeros({g, 3, 3}, f64);
  t.num_atoms = torch::zeros({g}, f64);
  t.batch = torch::zeros({n}, torch::TensorOptions().dtype(torch::kInt64));
  t.weight = torch::zeros({g}, f64);
  t.energy_weight = torch::zeros({g}, f64);
  t.forces_weight = torch::zeros({g}, f64);
  t.stress_weight = torch::zeros({g}, f64);
  t.virials_weight = torch::zeros({g}, f64);
  t.magmoms = torch::zeros({n}, f64);
  t.magmom_weight = torch::zeros({n}, f64);
  t.has_magmom = torch::zeros({n}, f64);
  auto m = t.magmoms.accessor<double, 1>();
  auto mw = t.magmom_weight.accessor<double, 1>();
  auto hm = t.has_magmom.accessor<double, 1>();
  auto e = t.energy.accessor<double, 1>();
  auto f = t.forces.accessor<double, 2>();
  auto s = t.stress.accessor<double, 3>();
  auto v = t.virials.accessor<double, 3>();
  auto na = t.num_atoms.accessor<double, 1>();
  auto b = t.batch.accessor<std::int64_t, 1>();
  std::int64_t atom = 0;
  for (std::int64_t k = 0; k < g; ++k) {
    const data::Config& c = *configs[static_cast<std::size_t>(k)];
    if (c.natoms() == 0) {
      throw InputError("make_loss_targets: " + c.where() + " has no atoms");
    }
    na[k] = static_cast<double>(c.natoms());
    t.weight[k] = c.weight;
    // The per-label weights are already 0 when the label is absent (trainer/data).
    t.energy_weight[k] = c.energy ? c.energy_weight : 0.0;
    t.forces_weight[k] = c.forces.empty() ? 0.0 : c.forces_weight;
    t.stress_weight[k] = c.stress ? c.stress_weight : 0.0;
    t.virials_weight[k] = c.virials ? c.virials_weight : 0.0;
    e[k] = c.energy.value_or(0.0);
    for (int i = 0; i < 9; ++i) {
      s[k][i / 3][i % 3] = c.stress ? (*c.stress)[static_cast<std::size_t>(i)] : 0.0;
      v[k][i / 3][i % 3] = c.virials ? (*c.virials)[static_cast<std::size_t>(i)] : 0.0;
    }
    if (!c.magmoms.empty() && c.magmoms.size() != c.natoms()) {
      throw InputError("make_loss_targets: " + c.where() + " has " + std::to_string(c.magmoms.size()) +
                       " magmoms for " + std::to_string(c.natoms()) + " atoms");
    }
    t.num_magmom_atoms += static_cast<std::int64_t>(c.magmoms.size());
    for (std::size_t i = 0; i < c.natoms(); ++i, ++atom) {
      b[atom] = k;
      if (!c.magmoms.empty()) {
        m[atom] = c.magmoms[i];
        mw[atom] = c.weight * c.magmom_weight;
        hm[atom] = 1.0;
      }
      for (std::size_t a = 0; a < 3 && !c.forces.empty(); ++a) {
        f[atom][static_cast<std::int64_t>(a)] = c.forces[3 * i + a];
      }
    }
  }
  for (torch::Tensor* x :
       {&t.energy, &t.forces, &t.stress, &t.virials, &t.num_atoms, &t.weight, &t.energy_weight,
        &t.forces_weight, &t.stress_weight, &t.virials_weight, &t.magmoms, &t.magmom_weight, &t.has_magmom}) {
    *x = x->to(device, dtype);
  }
  t.batch = t.batch.to(device);
  return t;
}

namespace {

/// CHGNet's magmom term (the file comment of loss.hpp), or undefined when it does not apply.
torch::Tensor magmom_term(const LossConfig& config, const LossPredictions& pred, const LossTargets& ref,
                          const std::optional<LossReduction>& reduction) {
  if (!(config.magmom_weight > 0) || !pred.magmoms.defined()) {
    return {};
  }
  if (!ref.magmoms.defined()) {
    throw InputError("compute_loss: predicted magmoms but no magmom targets (make_loss_targets builds them)");
  }
  check_shape(pred.magmoms, ref.magmoms, "magmoms");
  if (reduction && reduction->global_num_magmom_atoms < ref.num_magmom_atoms) {
    throw InputError("compute_loss: LossReduction::global_num_magmom_atoms (" +
                     std::to_string(reduction->global_num_magmom_atoms) + ") is below this rank's " +
                     std::to_string(ref.num_magmom_atoms) +
                     " atoms with magmom labels; sum them over the ranks");
  }
  const std::int64_t count = reduction ? reduction->global_num_magmom_atoms : ref.num_magmom_atoms;
  if (count <= 0) {
    return torch::zeros({}, pred.magmoms.options());  // no labels: chgnet leaves the term out
  }
  const auto raw = config.kind == LossKind::kHuber
                       ? at::huber_loss(ref.magmoms, pred.magmoms, at::Reduction::None, config.huber_delta) *
                             ref.has_magmom
                       : ref.magmom_weight * (pred.magmoms - ref.magmoms).square();
  const double world = reduction ? static_cast<double>(reduction->world_size) : 1.0;
  return config.magmom_weight * raw.sum() * (world / static_cast<double>(count));
}

/// The terms of --loss (the file comment of loss.hpp), without the magmom term.
LossTerms energy_forces_stress_loss(const LossConfig& config, const LossPredictions& pred,
                                    const LossTargets& ref, const std::optional<LossReduction>& reduction) {
  const char* name = config.kind == LossKind::kWeighted  ? "weighted"
                     : config.kind == LossKind::kStress  ? "stress"
                     : config.kind == LossKind::kVirials ? "virials"
                                                         : "huber";
  require(pred.energy, "energies", name);
  require(pred.forces, "forces", name);
  check_shape(pred.energy, ref.energy, "energies");
  check_shape(pred.forces, ref.forces, "forces");
  if (reduction &&
      (reduction->global_num_graphs <= 0 || reduction->global_num_atoms <= 0 || reduction->world_size <= 0)) {
    throw InputError("compute_loss: a LossReduction needs positive global counts and world size");
  }
  const std::int64_t gg = reduction ? reduction->global_num_graphs : 0;
  const std::int64_t ga = reduction ? reduction->global_num_atoms : 0;
  LossTerms out;
  if (config.kind == LossKind::kHuber) {
    const auto none = at::Reduction::None;
    const double d = config.huber_delta;
    out.energy = config.energy_weight *
                 reduce(at::huber_loss(ref.energy / ref.num_atoms, pred.energy / ref.num_atoms, none, d),
                        reduction, gg);
    out.forces =
        config.forces_weight * reduce(at::huber_loss(ref.forces, pred.forces, none, d), reduction, 3 * ga);
    out.total = out.energy + out.forces;
    if (pred.stress.defined()) {
      check_shape(pred.stress, ref.stress, "stresses");
      out.stress =
          config.stress_weight * reduce(at::huber_loss(ref.stress, pred.stress, none, d), reduction, 9 * gg);
      out.total = out.total + out.stress;
    }
    return out;
  }
  const torch::Tensor de = (ref.energy - pred.energy) / ref.num_atoms;
  out.energy = config.energy_weight * reduce(ref.weight * ref.energy_weight * de.square(), reduction, gg);
  const torch::Tensor wf = (ref.weight * ref.forces_weight).index_select(0, ref.batch).unsqueeze(-1);
  out.forces = config.forces_weight * reduce(wf * (ref.forces - pred.forces).square(), reduction, 3 * ga);
  out.total = out.energy + out.forces;
  if (config.kind == LossKind::kStress) {
    require(pred.stress, "stresses", name);
    check_shape(pred.stress, ref.stress, "stresses");
    const torch::Tensor w = (ref.weight * ref.stress_weight).view({-1, 1, 1});
    out.stress = config.stress_weight * reduce(w * (ref.stress - pred.stress).square(), reduction, 9 * gg);
    out.total = out.total + out.stress;
  } else if (config.kind == LossKind::kVirials) {
    require(pred.virials, "virials", name);
    check_shape(pred.virials, ref.virials, "virials");
    const torch::Tensor w = (ref.weight * ref.virials_weight).view({-1, 1, 1});
    const torch::Tensor dv = (ref.virials - pred.virials) / ref.num_atoms.view({-1, 1, 1});
    out.virials = config.virials_weight * reduce(w * dv.square(), reduction, 9 * gg);
    out.total = out.total + out.virials;
  }
  return out;
}

}  // namespace

LossTerms compute_loss(const LossConfig& config, const LossPredictions& pred, const LossTargets& ref,
                       const std::optional<LossReduction>& reduction) {
  LossTerms out = energy_forces_stress_loss(config, pred, ref, reduction);
  out.magmoms = magmom_term(config, pred, ref, reduction);
  if (out.magmoms.defined()) {
    out.total = out.total + out.magmoms;
  }
  return out;
}

}  // namespace fastmlip::trainer::train
