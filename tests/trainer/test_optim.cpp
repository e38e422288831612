// SPDX-License-Identifier: MIT
// The trainer's optimiser layer (trainer/train/optim.hpp): Adam/AdamW first steps by hand with
// mace-torch's weight-decay groups, gradient clipping, torch_ema's moving average,
// ReduceLROnPlateau and cosine schedules against torch's rules, learning-rate scaling by the
// global batch, and the configuration from the options table.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "options.hpp"
#include "train/optim.hpp"

namespace fastmlip::test {
namespace {

using namespace trainer::train;
const auto kF64 = torch::TensorOptions().dtype(torch::kFloat64);

std::vector<std::pair<std::string, torch::Tensor>> two_params() {
  return {{"readouts.0.linear.weight", torch::tensor({1.0, -2.0}, kF64).requires_grad_(true)},
          {"products.0.linear.weight", torch::tensor({0.5, 3.0}, kF64).requires_grad_(true)}};
}

void set_grads(std::vector<std::pair<std::string, torch::Tensor>>& ps, double g0, double g1) {
  ps[0].second.mutable_grad() = torch::tensor({g0, -g0}, kF64);
  ps[1].second.mutable_grad() = torch::tensor({g1, g1}, kF64);
}

TEST(TrainerOptim, WeightDecayFollowsMaceTorchGroups) {
  EXPECT_TRUE(mace_weight_decay("products.0.symmetric_contractions.contractions.0.weights_max"));
  EXPECT_TRUE(mace_weight_decay("interactions.1.linear.weight"));
  EXPECT_TRUE(mace_weight_decay("interactions.0.linear_up.weight") == false);
  EXPECT_FALSE(mace_weight_decay("interactions.0.conv_tp_weights.layer0.weight"));
  EXPECT_FALSE(mace_weight_decay("interactions.0.skip_tp.weight"));
  EXPECT_FALSE(mace_weight_decay("node_embedding.linear.weight"));
  EXPECT_FALSE(mace_weight_decay("readouts.1.linear_1.weight"));
}

TEST(TrainerOptim, AdamFirstStepByHand) {
  for (const auto kind : {OptimizerKind::kAdam, OptimizerKind::kAdamW}) {
    auto ps = two_params();
    OptimConfig c;
    c.optimizer = kind;
    c.lr = 0.1;
    c.weight_decay = 0.01;
    c.clip_grad.reset();
    Optimization opt(ps, c);
    set_grads(ps, 0.2, -0.4);
    EXPECT_EQ(opt.step(), 0.0);
    // First step: m_hat = g, v_hat = g^2, so p -= lr g / (|g| + eps). Adam adds wd p to g (L2)
    // in the decayed group only; AdamW shrinks p by (1 - lr wd) first.
    const double eps = 1e-8;
    auto step = [&](double p, double g, bool decayed) {
      if (kind == OptimizerKind::kAdam) {
        const double gg = g + (decayed ? c.weight_decay * p : 0.0);
        return p - c.lr * gg / (std::abs(gg) + eps);
      }
      const double q = decayed ? p * (1.0 - c.lr * c.weight_decay) : p;
      return q - c.lr * g / (std::abs(g) + eps);
    };
    EXPECT_DOUBLE_EQ(ps[0].second[0].item<double>(), step(1.0, 0.2, false));
    EXPECT_DOUBLE_EQ(ps[0].second[1].item<double>(), step(-2.0, -0.2, false));
    EXPECT_DOUBLE_EQ(ps[1].second[0].item<double>(), step(0.5, -0.4, true));
    EXPECT_DOUBLE_EQ(ps[1].second[1].item<double>(), step(3.0, -0.4, true));
    EXPECT_EQ(opt.steps(), 1);
  }
}

TEST(TrainerOptim, ClipsTheGradientNorm) {
  auto ps = two_params();
  OptimConfig c;
  c.clip_grad = 0.5;
  Optimization opt(ps, c);
  set_grads(ps, 3.0, 0.0);  // norm 3 sqrt(2)
  auto g = ps[0].second.grad();
  EXPECT_NEAR(opt.step(), 3.0 * std::sqrt(2.0), 1e-15);
  // clip_grad_norm_ scales by max_norm / (norm + 1e-6).
  EXPECT_NEAR(g[0].item<double>(), 3.0 * 0.5 / (3.0 * std::sqrt(2.0) + 1e-6), 1e-15);
}

TEST(TrainerOptim, EmaAsTorchEma) {
  auto ps = two_params();
  ExponentialMovingAverage ema(ps, 0.99);
  torch::NoGradGuard ng;
  ps[0].second.fill_(2.0);
  ema.update();  // decay min(0.99, 2/11)
  const double d1 = 2.0 / 11.0;
  EXPECT_DOUBLE_EQ(ema.shadow()[0][0].item<double>(), 1.0 - (1.0 - d1) * (1.0 - 2.0));
  const double s1 = ema.shadow()[0][0].item<double>();
  ps[0].second.fill_(4.0);
  ema.update();  // decay 3/12
  const double d2 = 3.0 / 12.0;
  EXPECT_DOUBLE_EQ(ema.shadow()[0][0].item<double>(), s1 - (1.0 - d2) * (s1 - 4.0));
  EXPECT_EQ(ema.num_updates(), 2);
  auto target = torch::zeros({2}, kF64);
  ema.copy_to({target, torch::zeros({2}, kF64)});
  EXPECT_EQ(target[0].item<double>(), ema.shadow()[0][0].item<double>());
  EXPECT_THROW(ExponentialMovingAverage(ps, 1.0), InputError);
}

TEST(TrainerOptim, PlateauAsTorch) {
  ReduceLROnPlateau s(0.5, 1);
  double lr = 1.0;
  const std::vector<double> metrics = {1.0, 1.0, 1.0, 0.5, 0.49999, 0.6, 0.4};
  const std::vector<double> expect = {1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25};
  for (std::size_t k = 0; k < metrics.size(); ++k) {
    lr = s.step(metrics[k], lr);
    EXPECT_EQ(lr, expect[k]) << "epoch " << k;  // 0.49999 is not 1e-4 relatively better
  }
  EXPECT_EQ(s.best(), 0.4);
}

TEST(TrainerOptim, CosineSchedule) {
  EXPECT_DOUBLE_EQ(cosine_annealing_lr(0.01, 0, 10), 0.01);
  EXPECT_DOUBLE_EQ(cosine_annealing_lr(0.01, 5, 10), 0.005);
  EXPECT_NEAR(cosine_annealing_lr(0.01, 10, 10), 0.0, 1e-18);
  auto ps = two_params();
  OptimConfig c;
  c.scheduler = SchedulerKind::kCosineAnnealing;
  c.max_num_epochs = 4;
  c.lr = 0.2;
  Optimization opt(ps, c);
  opt.end_epoch(std::nullopt);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.1 * (1.0 + std::cos(std::acos(-1.0) / 4.0)));
  EXPECT_EQ(opt.epochs(), 1);
}

TEST(TrainerOptim, PlateauThroughOptimization) {
  auto ps = two_params();
  OptimConfig c;
  c.lr = 0.01;
  c.lr_factor = 0.8;
  c.scheduler_patience = 0;
  Optimization opt(ps, c);
  opt.end_epoch(1.0);
  EXPECT_EQ(opt.lr(), 0.01);
  opt.end_epoch(2.0);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.008);
  opt.end_epoch(std::nullopt);  // no validation this epoch: unchanged
  EXPECT_DOUBLE_EQ(opt.lr(), 0.008);
}

TEST(TrainerOptim, LearningRateScalesLinearlyWithTheGlobalBatch) {
  EXPECT_EQ(scaled_learning_rate(0.01, 4096, std::nullopt), 0.01);
  EXPECT_DOUBLE_EQ(scaled_learning_rate(0.01, 4096, 1024), 0.04);
  EXPECT_DOUBLE_EQ(scaled_learning_rate(0.01, 512, 1024), 0.005);
  EXPECT_THROW(scaled_learning_rate(0.01, 0, 1024), InputError);
}

TEST(TrainerOptim, ConfigFromOptions) {
  trainer::Options o;
  OptimConfig d = optim_config_from(o, 2);
  EXPECT_EQ(d.optimizer, OptimizerKind::kAdam);
  EXPECT_EQ(d.lr, 0.01);
  EXPECT_TRUE(d.amsgrad);
  EXPECT_EQ(d.weight_decay, 5e-7);
  EXPECT_EQ(*d.clip_grad, 10.0);
  EXPECT_EQ(d.scheduler, SchedulerKind::kReduceLROnPlateau);
  EXPECT_EQ(d.lr_factor, 0.8);
  EXPECT_EQ(d.scheduler_patience, 50);
  EXPECT_FALSE(d.ema);
  o.apply_flags({"--optimizer", "adamw", "--amsgrad", "false", "--clip_grad", "None", "--ema", "--ema_decay",
                 "0.995", "--scheduler", "CosineAnnealingLR", "--batch_capacity", "1000",
                 "--lr_reference_batch", "500", "--lr", "0.002", "--beta", "0.85"});
  const OptimConfig c = optim_config_from(o, 2);
  EXPECT_EQ(c.optimizer, OptimizerKind::kAdamW);
  EXPECT_FALSE(c.amsgrad);
  EXPECT_FALSE(c.clip_grad.has_value());
  EXPECT_TRUE(c.ema);
  EXPECT_EQ(c.ema_decay, 0.995);
  EXPECT_EQ(c.scheduler, SchedulerKind::kCosineAnnealing);
  EXPECT_DOUBLE_EQ(c.lr, 0.002 * 2000.0 / 500.0);
  EXPECT_EQ(c.beta1, 0.85);
}

}  // namespace
}  // namespace fastmlip::test
