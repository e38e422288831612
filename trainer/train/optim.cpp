// SPDX-License-Identifier: MIT
#include "train/optim.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "core/error.hpp"
#include "options.hpp"
#include "train/checkpoint.hpp"

namespace fastmlip::trainer::train {
namespace {

/// LibTorch keys an optimiser's per-parameter state by the address of the parameter's
/// TensorImpl: printed as a string in older releases (Debian's 1.13), the pointer itself in newer
/// ones (PyTorch 2.11, the GPU machines'). The key type is read off the state map, so both build.
using StateKey = typename std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
template <class Key = StateKey>  // a template, so that the other branch is discarded
Key state_key(const torch::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;  // as c10::guts::to_string printed it
    address << p.unsafeGetTensorImpl();
    return address.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

}  // namespace

double scaled_learning_rate(double lr, std::int64_t global_batch, std::optional<std::int64_t> reference) {
  if (!reference) {
    return lr;
  }
  if (global_batch <= 0 || *reference <= 0) {
    throw InputError("scaled_learning_rate: the global batch (" + std::to_string(global_batch) +
                     ") and lr_reference_batch (" + std::to_string(*reference) + ") must be positive");
  }
  return lr * static_cast<double>(global_batch) / static_cast<double>(*reference);
}

OptimConfig optim_config_from(const Options& options, int world_size) {
  OptimConfig c;
  c.optimizer = options.get_string("optimizer") == "adamw" ? OptimizerKind::kAdamW : OptimizerKind::kAdam;
  std::optional<std::int64_t> reference;
  if (options.has("lr_reference_batch")) {
    reference = options.get_int("lr_reference_batch");
  }
  c.lr = scaled_learning_rate(options.get_float("lr"), options.get_int("batch_capacity") * world_size,
                              reference);
  c.beta1 = options.get_float("beta");
  c.amsgrad = options.get_bool("amsgrad");
  c.weight_decay = options.get_float("weight_decay");
  c.clip_grad =
      options.has("clip_grad") ? std::optional<double>(options.get_float("clip_grad")) : std::nullopt;
  c.ema = options.get_bool("ema");
  c.ema_decay = options.get_float("ema_decay");
  c.scheduler = options.get_string("scheduler") == "CosineAnnealingLR" ? SchedulerKind::kCosineAnnealing
                                                                       : SchedulerKind::kReduceLROnPlateau;
  c.lr_factor = options.get_float("lr_factor");
  c.scheduler_patience = options.get_int("scheduler_patience");
  c.max_num_epochs = options.get_int("max_num_epochs");
  return c;
}

bool mace_weight_decay(const std::string& name) {
  auto starts = [&](const char* p) { return name.rfind(p, 0) == 0; };
  if (starts("products.")) {
    return true;
  }
  return starts("interactions.") && (name.find("linear.weight") != std::string::npos ||
                                     name.find("skip_tp_full.weight") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------

ExponentialMovingAverage::ExponentialMovingAverage(std::vector<std::pair<std::string, torch::Tensor>> params,
                                                   double decay)
    : m_params(std::move(params)), m_decay(decay) {
  if (!(decay > 0.0 && decay < 1.0)) {
    throw InputError("ExponentialMovingAverage: ema_decay " + std::to_string(decay) + " must be in (0, 1)");
  }
  for (const auto& np : m_params) {
    m_shadow.push_back(np.second.detach().clone());
  }
}

void ExponentialMovingAverage::update() {
  torch::NoGradGuard no_grad;
  ++m_num_updates;
  const double n = static_cast<double>(m_num_updates);
  const double decay = std::min(m_decay, (1.0 + n) / (10.0 + n));
  for (std::size_t k = 0; k < m_shadow.size(); ++k) {
    m_shadow[k].sub_((m_shadow[k] - m_params[k].second.detach()).mul_(1.0 - decay));
  }
}

void ExponentialMovingAverage::copy_to(const std::vector<torch::Tensor>& targets) const {
  if (targets.size() != m_shadow.size()) {
    throw InputError("ExponentialMovingAverage::copy_to: " + std::to_string(targets.size()) +
                     " tensors for " + std::to_string(m_shadow.size()) + " averages");
  }
  torch::NoGradGuard no_grad;
  for (std::size_t k = 0; k < m_shadow.size(); ++k) {
    targets[k].copy_(m_shadow[k]);
  }
}

void ExponentialMovingAverage::save(CheckpointState& state) const {
  state.ints["ema/num_updates"] = m_num_updates;
  state.reals["ema/decay"] = m_decay;
  for (std::size_t k = 0; k < m_shadow.size(); ++k) {
    state.tensors["ema/" + m_params[k].first] = m_shadow[k].clone();
  }
}

void ExponentialMovingAverage::load(const CheckpointState& state) {
  m_num_updates = state.integer("ema/num_updates");
  m_decay = state.real("ema/decay");
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (std::size_t k = 0; k < m_shadow.size(); ++k) {
    named.emplace_back(m_params[k].first, m_shadow[k]);
  }
  load_tensors(state, "ema/", named);
}

// ---------------------------------------------------------------------------------------------

ReduceLROnPlateau::ReduceLROnPlateau(double factor, std::int64_t patience, double threshold, double min_lr,
                                     double eps)
    : m_factor(factor),
      m_threshold(threshold),
      m_min_lr(min_lr),
      m_eps(eps),
      m_patience(patience),
      m_best(std::numeric_limits<double>::infinity()) {
  if (!(factor > 0.0 && factor < 1.0)) {
    throw InputError("ReduceLROnPlateau: lr_factor " + std::to_string(factor) + " must be in (0, 1)");
  }
}

double ReduceLROnPlateau::step(double metric, double lr) {
  // torch: mode 'min', threshold_mode 'rel': better when metric < best * (1 - threshold).
  if (metric < m_best * (1.0 - m_threshold)) {
    m_best = metric;
    m_bad = 0;
  } else {
    ++m_bad;
  }
  if (m_bad > m_patience) {
    m_bad = 0;
    const double reduced = std::max(lr * m_factor, m_min_lr);
    if (lr - reduced > m_eps) {
      return reduced;
    }
  }
  return lr;
}

void ReduceLROnPlateau::save(CheckpointState& state) const {
  state.reals["sched/best"] = m_best;
  state.ints["sched/num_bad_epochs"] = m_bad;
}

void ReduceLROnPlateau::load(const CheckpointState& state) {
  m_best = state.real("sched/best");
  m_bad = state.integer("sched/num_bad_epochs");
}

double cosine_annealing_lr(double lr0, std::int64_t epoch, std::int64_t t_max, double eta_min) {
  const double pi = std::acos(-1.0);
  return eta_min + (lr0 - eta_min) *
                       (1.0 + std::cos(pi * static_cast<double>(epoch) / static_cast<double>(t_max))) / 2.0;
}

// ---------------------------------------------------------------------------------------------

Optimization::Optimization(std::vector<std::pair<std::string, torch::Tensor>> named_params,
                           const OptimConfig& config)
    : m_params(std::move(named_params)), m_config(config) {
  if (!(config.lr > 0.0)) {
    throw InputError("Optimization: the learning rate must be positive, not " + std::to_string(config.lr));
  }
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& [name, p] : m_params) {
    (mace_weight_decay(name) ? decay : no_decay).push_back(p);
  }
  const auto betas = std::make_tuple(config.beta1, config.beta2);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (config.optimizer == OptimizerKind::kAdam) {
    auto base = torch::optim::AdamOptions(config.lr).betas(betas).eps(config.eps).amsgrad(config.amsgrad);
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamOptions>(base.weight_decay(0.0)));
    groups.emplace_back(decay,
                        std::make_unique<torch::optim::AdamOptions>(base.weight_decay(config.weight_decay)));
    m_optimizer = std::make_unique<torch::optim::Adam>(groups, base);
  } else {
    auto base = torch::optim::AdamWOptions(config.lr).betas(betas).eps(config.eps).amsgrad(config.amsgrad);
    groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(base.weight_decay(0.0)));
    groups.emplace_back(decay,
                        std::make_unique<torch::optim::AdamWOptions>(base.weight_decay(config.weight_decay)));
    m_optimizer = std::make_unique<torch::optim::AdamW>(groups, base);
  }
  if (config.ema) {
    m_ema = std::make_unique<ExponentialMovingAverage>(m_params, config.ema_decay);
  }
  if (config.scheduler == SchedulerKind::kReduceLROnPlateau) {
    m_plateau = std::make_unique<ReduceLROnPlateau>(config.lr_factor, config.scheduler_patience);
  } else if (config.max_num_epochs < 1) {
    throw InputError("Optimization: the cosine schedule needs max_num_epochs >= 1");
  }
}

Optimization::~Optimization() = default;

void Optimization::zero_grad() {
  for (auto& np : m_params) {
    if (np.second.grad().defined()) {
      np.second.mutable_grad().zero_();
    }
  }
}

double Optimization::step() {
  double norm = 0.0;
  if (m_config.clip_grad) {
    std::vector<torch::Tensor> params;
    for (const auto& np : m_params) {
      params.push_back(np.second);
    }
    norm = torch::nn::utils::clip_grad_norm_(params, *m_config.clip_grad);
  }
  m_optimizer->step();
  if (m_ema) {
    m_ema->update();
  }
  ++m_steps;
  return norm;
}

void Optimization::end_epoch(std::optional<double> valid_loss) {
  ++m_epochs;
  if (m_plateau) {
    if (valid_loss) {
      set_lr(m_plateau->step(*valid_loss, lr()));
    }
  } else {
    set_lr(cosine_annealing_lr(m_config.lr, m_epochs, m_config.max_num_epochs));
  }
}

double Optimization::lr() const { return m_optimizer->param_groups().front().options().get_lr(); }

void Optimization::set_lr(double lr) {
  for (auto& g : m_optimizer->param_groups()) {
    g.options().set_lr(lr);
  }
}

void Optimization::save(CheckpointState& state) const {
  state.ints["optim/kind"] = static_cast<std::int64_t>(m_config.optimizer);
  state.ints["optim/amsgrad"] = m_config.amsgrad ? 1 : 0;
  state.reals["optim/lr"] = lr();
  state.ints["counters/steps"] = m_steps;
  state.ints["counters/epochs"] = m_epochs;
  const auto& st = m_optimizer->state();
  for (const auto& [name, p] : m_params) {
    const auto it = st.find(state_key(p));
    if (it == st.end()) {
      continue;  // not stepped yet
    }
    const std::string pre = "optim/" + name + "/";
    // AdamWParamState has the same fields as AdamParamState.
    if (m_config.optimizer == OptimizerKind::kAdam) {
      const auto& s = static_cast<const torch::optim::AdamParamState&>(*it->second);
      state.ints[pre + "step"] = s.step();
      state.tensors[pre + "exp_avg"] = s.exp_avg().clone();
      state.tensors[pre + "exp_avg_sq"] = s.exp_avg_sq().clone();
      if (s.max_exp_avg_sq().defined()) {
        state.tensors[pre + "max_exp_avg_sq"] = s.max_exp_avg_sq().clone();
      }
    } else {
      const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
      state.ints[pre + "step"] = s.step();
      state.tensors[pre + "exp_avg"] = s.exp_avg().clone();
      state.tensors[pre + "exp_avg_sq"] = s.exp_avg_sq().clone();
      if (s.max_exp_avg_sq().defined()) {
        state.tensors[pre + "max_exp_avg_sq"] = s.max_exp_avg_sq().clone();
      }
    }
  }
  if (m_plateau) {
    m_plateau->save(state);
  }
  if (m_ema) {
    m_ema->save(state);
  }
}

namespace {

template <class S>
std::unique_ptr<S> param_state(const CheckpointState& state, const std::string& pre, const torch::Tensor& p) {
  auto s = std::make_unique<S>();
  s->step(state.integer(pre + "step"));
  auto get = [&](const std::string& k) {
    const torch::Tensor& t = state.tensor(pre + k);
    if (t.sizes() != p.sizes() || t.scalar_type() != p.scalar_type()) {
      throw InputError(state.source + ": checkpoint tensor '" + pre + k +
                       "' does not match its parameter's " +
                       "shape or dtype (a checkpoint of another model?)");
    }
    // A copy on the parameter's device: a checkpoint restarts on the CPU or a GPU alike.
    return t.to(p.device(), t.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
  };
  s->exp_avg(get("exp_avg"));
  s->exp_avg_sq(get("exp_avg_sq"));
  if (state.has_tensor(pre + "max_exp_avg_sq")) {
    s->max_exp_avg_sq(get("max_exp_avg_sq"));
  }
  return s;
}

}  // namespace

void Optimization::load(const CheckpointState& state) {
  if (state.integer("optim/kind") != static_cast<std::int64_t>(m_config.optimizer) ||
      state.integer("optim/amsgrad") != (m_config.amsgrad ? 1 : 0)) {
    throw InputError(state.source + ": the checkpoint was written with another optimiser (--optimizer or " +
                     "--amsgrad differ from this run's)");
  }
  auto& st = m_optimizer->state();
  st.clear();
  for (const auto& [name, p] : m_params) {
    const std::string pre = "optim/" + name + "/";
    if (state.ints.count(pre + "step") == 0) {
      continue;
    }
    if (m_config.optimizer == OptimizerKind::kAdam) {
      st[state_key(p)] = param_state<torch::optim::AdamParamState>(state, pre, p);
    } else {
      st[state_key(p)] = param_state<torch::optim::AdamWParamState>(state, pre, p);
    }
  }
  set_lr(state.real("optim/lr"));
  m_steps = state.integer("counters/steps");
  m_epochs = state.integer("counters/epochs");
  if (m_plateau) {
    m_plateau->load(state);
  }
  if (m_ema) {
    m_ema->load(state);
  }
}

}  // namespace fastmlip::trainer::train
