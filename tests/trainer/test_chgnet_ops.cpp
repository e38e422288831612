// SPDX-License-Identifier: MIT
// CHGNet's dense layers, LayerNorm and gated MLPs as autograd functions on the core kernels
// (trainer/models/chgnet_ops.hpp) against the plain LibTorch ops the trainer's CHGNet ran before
// them (torch::linear, torch::layer_norm, silu * sigmoid): the value, the first derivatives
// (autograd with create_graph, as a force loss takes them) and the second (the gradient of a
// function of those first derivatives with respect to every input and weight) agree to
// round-off in double and to float precision in float, at odd sizes across the kernels' tiles.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "models/chgnet_ops.hpp"

namespace fastmlip::trainer {
namespace {

template <class T>
torch::TensorOptions opts() {
  return torch::TensorOptions().dtype(torch_dtype<T>());
}

/// f's output y, then the first derivatives g_k = d(sum(c * y))/d in_k with create_graph, then
/// d(sum_k sum(a_k * g_k))/d in_j for every j: all flattened into one list of tensors.
std::vector<torch::Tensor> derivatives(const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& f,
                                       std::vector<torch::Tensor> in, std::uint64_t seed) {
  for (auto& t : in) t = t.detach().clone().requires_grad_(true);
  const auto y = f(in);
  torch::manual_seed(seed);
  const auto c = torch::randn_like(y);
  const auto g = torch::autograd::grad({(c * y).sum()}, in, {}, true, true, true);
  torch::Tensor s = torch::zeros({}, y.options());
  for (std::size_t k = 0; k < g.size(); ++k) {
    if (g[k].defined()) s = s + (torch::randn_like(g[k]) * g[k]).sum();
  }
  const auto h = torch::autograd::grad({s}, in, {}, false, false, true);
  std::vector<torch::Tensor> out{y.detach()};
  for (const auto& t : g) out.push_back(t.defined() ? t.detach() : torch::Tensor());
  for (const auto& t : h) out.push_back(t.defined() ? t.detach() : torch::Tensor());
  return out;
}

double max_abs(const torch::Tensor& t) {
  return t.numel() == 0 ? 0.0 : t.abs().max().item<double>();
}

void expect_equal(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want, double rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    const bool zero_want = !want[k].defined() || max_abs(want[k]) == 0.0;
    if (!got[k].defined()) {
      EXPECT_TRUE(zero_want) << what << ": result " << k << " missing";
      continue;
    }
    const auto w = want[k].defined() ? want[k] : torch::zeros_like(got[k]);
    const double scale = std::max(1.0, max_abs(w));
    EXPECT_LE(max_abs(got[k].to(torch::kFloat64) - w.to(torch::kFloat64)), rtol * scale)
        << what << ": result " << k << " (0: value, then first, then second derivatives)";
  }
}

template <class T>
class ChgnetOps : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ChgnetOps, Precisions);

template <class T>
double tol() {
  return std::is_same_v<T, double> ? 1e-11 : 2e-4;
}

TYPED_TEST(ChgnetOps, DenseEqualsTorchLinear) {
  using T = TypeParam;
  torch::manual_seed(1);
  for (const int rows : {0, 1, 13, 77}) {
    for (const bool bias : {true, false}) {
      std::vector<torch::Tensor> in{torch::randn({rows, 13}, opts<T>()), torch::randn({7, 13}, opts<T>())};
      if (bias) in.push_back(torch::randn({7}, opts<T>()));
      const auto op = c10::make_intrusive<DenseOp<T>>(DenseStages{13, 7, bias}, "dense");
      const auto ours = derivatives([&](const auto& v) { return apply_kernel(op, v); }, in, 5);
      const auto torch_ = derivatives(
          [&](const auto& v) { return torch::linear(v[0], v[1], bias ? v[2] : torch::Tensor()); }, in, 5);
      expect_equal(ours, torch_, tol<T>(), "dense, " + std::to_string(rows) + " rows, bias " + std::to_string(bias));
    }
  }
}

TYPED_TEST(ChgnetOps, LayerNormEqualsTorchLayerNorm) {
  using T = TypeParam;
  torch::manual_seed(2);
  for (const int rows : {1, 13, 77}) {
    std::vector<torch::Tensor> in{torch::randn({rows, 11}, opts<T>()) * 2, 1 + 0.3 * torch::randn({11}, opts<T>()),
                                  torch::randn({11}, opts<T>())};
    const auto op = c10::make_intrusive<LayerNormOp<T>>(LayerNormStages{11}, "ln");
    const auto ours = derivatives([&](const auto& v) { return apply_kernel(op, v); }, in, 6);
    const auto torch_ = derivatives([](const auto& v) { return torch::layer_norm(v[0], {11}, v[1], v[2], 1e-5); }, in, 6);
    expect_equal(ours, torch_, 10 * tol<T>(), "layer norm, " + std::to_string(rows) + " rows");
  }
}

TYPED_TEST(ChgnetOps, GatedMlpEqualsChgnetsGatedMlpInTorchOps) {
  using T = TypeParam;
  torch::manual_seed(3);
  struct Shape {
    int in, hidden, out;
    bool norm;
  };
  for (const Shape sh : {Shape{19, 9, 5, true}, Shape{11, 0, 7, true}, Shape{9, 5, 3, false}}) {
    for (const int rows : {1, 13, 77}) {
      const int width = sh.hidden > 0 ? sh.hidden : sh.out;
      std::vector<torch::Tensor> in{torch::randn({rows, sh.in}, opts<T>())};
      auto add = [&](std::vector<std::int64_t> shape, double scale, double shift) {
        in.push_back(shift + scale * torch::randn(shape, opts<T>()));
      };
      for (int k = 0; k < 2; ++k) add({width, sh.in}, 0.4, 0), add({width}, 0.4, 0);
      if (sh.hidden > 0)
        for (int k = 0; k < 2; ++k) add({sh.out, sh.hidden}, 0.4, 0), add({sh.out}, 0.4, 0);
      if (sh.norm)
        for (int k = 0; k < 2; ++k) add({sh.out}, 0.3, 1), add({sh.out}, 0.3, 0);
      GatedMlpStages stages;
      stages.in = sh.in, stages.hidden = sh.hidden, stages.out = sh.out, stages.norm = sh.norm;
      const auto op = c10::make_intrusive<GatedMlpOp<T>>(stages, "gmlp");
      const auto ours = derivatives([&](const auto& v) { return apply_kernel(op, v); }, in, 7);
      // What trainer/models/chgnet.cpp computed with plain ops before the kernels.
      const auto plain = [&](const std::vector<torch::Tensor>& v) {
        std::size_t k = 1;
        auto w1c = v[k++], b1c = v[k++], w1g = v[k++], b1g = v[k++];
        auto core = torch::linear(v[0], w1c, b1c), gate = torch::linear(v[0], w1g, b1g);
        if (sh.hidden > 0) {
          auto w2c = v[k++], b2c = v[k++], w2g = v[k++], b2g = v[k++];
          core = torch::linear(torch::silu(core), w2c, b2c);
          gate = torch::linear(torch::silu(gate), w2g, b2g);
        }
        if (sh.norm) {
          auto lcw = v[k++], lcb = v[k++], lgw = v[k++], lgb = v[k++];
          core = torch::layer_norm(core, {sh.out}, lcw, lcb, 1e-5);
          gate = torch::layer_norm(gate, {sh.out}, lgw, lgb, 1e-5);
        }
        return torch::silu(core) * torch::sigmoid(gate);
      };
      const auto torch_ = derivatives(plain, in, 7);
      expect_equal(ours, torch_, 10 * tol<T>(),
                   "gated MLP in " + std::to_string(sh.in) + " hidden " + std::to_string(sh.hidden) + ", " +
                       std::to_string(rows) + " rows");
    }
  }
}

}  // namespace
}  // namespace fastmlip::trainer
