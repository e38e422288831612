// SPDX-License-Identifier: MIT
#pragma once
/// \file The optimiser side of training, as mace-torch 0.3.13's run_train sets it up
/// (mace/tools/scripts_utils.py get_params_options, get_optimizer, LRScheduler; torch_ema):
///
/// - Adam or AdamW (LibTorch's torch::optim, betas (--beta, 0.999), eps 1e-8, --amsgrad) in two
///   parameter groups: --weight_decay on the interactions' linear and skip_tp weights and on the
///   product blocks, none on the embedding, the radial MLPs and the readouts (mace-torch's
///   groups; mace_weight_decay() is the rule). Adam adds the decay to the gradient (L2),
///   AdamW decouples it.
/// - Gradient-norm clipping before each step (--clip_grad, torch.nn.utils.clip_grad_norm_).
/// - An exponential moving average of the weights (--ema, --ema_decay) as torch_ema's
///   ExponentialMovingAverage with use_num_updates: at update n (1, 2, ...) the decay is
///   min(ema_decay, (1 + n) / (10 + n)) and shadow -= (1 - decay) (shadow - param).
/// - Learning-rate schedules stepped once per epoch: ReduceLROnPlateau on the validation loss
///   (torch's defaults besides factor --lr_factor and patience --scheduler_patience: mode min,
///   threshold 1e-4 relative, cooldown 0, min_lr 0, eps 1e-8), or CosineAnnealingLR with
///   T_max = --max_num_epochs and eta_min 0 in torch's closed form
///   lr(t) = lr0 (1 + cos(pi t / T_max)) / 2 after t epochs.
/// - Learning-rate scaling by the global batch (FastCHGNet's linear scaling rule): with
///   --lr_reference_batch B_ref (atoms) set, the initial learning rate is
///       lr0 = --lr * B / B_ref,   B = --batch_capacity * number of ranks (atoms per global step),
///   and the schedules start from lr0; without it lr0 = --lr.
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fastmlip::trainer {
class Options;
}

namespace fastmlip::trainer::train {

struct CheckpointState;

enum class OptimizerKind { kAdam, kAdamW };
enum class SchedulerKind { kReduceLROnPlateau, kCosineAnnealing };

struct OptimConfig {
  OptimizerKind optimizer = OptimizerKind::kAdam;
  double lr = 0.01;  ///< already scaled (scaled_learning_rate)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool amsgrad = true;
  double weight_decay = 5e-7;
  std::optional<double> clip_grad = 10.0;
  bool ema = false;
  double ema_decay = 0.99;
  SchedulerKind scheduler = SchedulerKind::kReduceLROnPlateau;
  double lr_factor = 0.8;
  std::int64_t scheduler_patience = 50;
  std::int64_t max_num_epochs = 2048;  ///< T_max of the cosine schedule
};

/// lr * global_batch / reference, or lr without a reference. InputError for a non-positive batch.
double scaled_learning_rate(double lr, std::int64_t global_batch, std::optional<std::int64_t> reference);

/// The options' optimiser settings; `world_size` ranks give the global batch for the scaling.
OptimConfig optim_config_from(const Options& options, int world_size);

/// mace-torch's weight-decay rule on a state_dict name: products.*, and interactions.* whose
/// name contains "linear.weight" or "skip_tp_full.weight".
bool mace_weight_decay(const std::string& name);

/// torch_ema's ExponentialMovingAverage (use_num_updates), over a fixed list of parameters.
class ExponentialMovingAverage {
 public:
  ExponentialMovingAverage(std::vector<std::pair<std::string, torch::Tensor>> params, double decay);
  /// One update after an optimiser step.
  void update();
  /// Copies the averages into `targets` (same order and shapes as the parameters), e.g. the
  /// parameters of a model to validate or export with the EMA weights.
  void copy_to(const std::vector<torch::Tensor>& targets) const;
  const std::vector<torch::Tensor>& shadow() const { return m_shadow; }
  std::int64_t num_updates() const { return m_num_updates; }
  void save(CheckpointState& state) const;
  void load(const CheckpointState& state);

 private:
  std::vector<std::pair<std::string, torch::Tensor>> m_params;
  std::vector<torch::Tensor> m_shadow;
  double m_decay;
  std::int64_t m_num_updates = 0;
};

/// torch.optim.lr_scheduler.ReduceLROnPlateau (mode min, relative threshold).
class ReduceLROnPlateau {
 public:
  ReduceLROnPlateau(double factor, std::int64_t patience, double threshold = 1e-4, double min_lr = 0.0,
                    double eps = 1e-8);
  /// The learning rate after an epoch whose validation loss is `metric`.
  double step(double metric, double lr);
  void save(CheckpointState& state) const;
  void load(const CheckpointState& state);
  double best() const { return m_best; }
  std::int64_t num_bad_epochs() const { return m_bad; }

 private:
  double m_factor, m_threshold, m_min_lr, m_eps;
  std::int64_t m_patience;
  double m_best;
  std::int64_t m_bad = 0;
};

/// The learning rate of CosineAnnealingLR after `epoch` epochs.
double cosine_annealing_lr(double lr0, std::int64_t epoch, std::int64_t t_max, double eta_min = 0.0);

/// The optimiser, its schedule, clipping and EMA over one model's named parameters, with
/// counters; save/load put all of it in a checkpoint.
class Optimization {
 public:
  Optimization(std::vector<std::pair<std::string, torch::Tensor>> named_params, const OptimConfig& config);
  ~Optimization();

  void zero_grad();
  /// After backward (and the gradient all-reduce): clips, steps, updates the EMA, counts the
  /// step. Returns the gradient norm before clipping (0 when clipping is off).
  double step();
  /// After an epoch: steps the schedule (ReduceLROnPlateau needs the validation loss; without
  /// one it leaves the rate alone) and counts the epoch.
  void end_epoch(std::optional<double> valid_loss);

  double lr() const;
  std::int64_t steps() const { return m_steps; }
  std::int64_t epochs() const { return m_epochs; }
  const ExponentialMovingAverage* ema() const { return m_ema.get(); }
  const OptimConfig& config() const { return m_config; }

  /// Optimiser moments ("optim/..."), learning rate, scheduler ("sched/..."), EMA ("ema/...")
  /// and counters. Model parameters and RNG are the caller's (save_tensors, save_torch_rng).
  void save(CheckpointState& state) const;
  /// InputError naming the checkpoint when it was written with another optimiser or model.
  void load(const CheckpointState& state);

 private:
  void set_lr(double lr);
  std::vector<std::pair<std::string, torch::Tensor>> m_params;
  OptimConfig m_config;
  std::unique_ptr<torch::optim::Optimizer> m_optimizer;
  std::unique_ptr<ExponentialMovingAverage> m_ema;
  std::unique_ptr<ReduceLROnPlateau> m_plateau;
  std::int64_t m_steps = 0, m_epochs = 0;
};

}  // namespace fastmlip::trainer::train
