// SPDX-License-Identifier: MIT
// The trainer computes forces as -dE/dx with create_graph=true and then differentiates the
// force loss with respect to the weights: a double backward through our custom autograd
// functions. This pins that the LibTorch we build against supports it, with a function whose
// backward is itself written in differentiable torch ops, the pattern the kernel wrappers use.
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {

// y = w * x^3 with a hand-written backward (as our kernel wrappers have).
struct CubeScaled : public torch::autograd::Function<CubeScaled> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, torch::Tensor w) {
    ctx->save_for_backward({x, w});
    return w * x.pow(3);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list g) {
    auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    return {g[0] * 3 * w * x.pow(2), (g[0] * x.pow(3)).sum().reshape(w.sizes())};
  }
};

TEST(AutogradToolchain, DoubleBackwardThroughCustomFunction) {
  auto x = torch::tensor({0.5, -1.25, 2.0}, torch::kFloat64).requires_grad_();
  auto w = torch::tensor({1.5}, torch::kFloat64).requires_grad_();
  auto energy = CubeScaled::apply(x, w).sum();
  // "forces" = -dE/dx = -3 w x^2, kept differentiable
  auto forces = -torch::autograd::grad({energy}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
  auto expected_f = -3 * w.detach() * x.detach().pow(2);
  EXPECT_TRUE(torch::allclose(forces.detach(), expected_f, 1e-14, 1e-14));
  // force loss L = sum F^2 = 9 w^2 sum x^4 -> dL/dw = 18 w sum x^4
  auto loss = forces.pow(2).sum();
  auto dl_dw = torch::autograd::grad({loss}, {w})[0];
  const double expected = 18 * 1.5 * (std::pow(0.5, 4) + std::pow(1.25, 4) + std::pow(2.0, 4));
  EXPECT_NEAR(dl_dw.item<double>(), expected, 1e-12);
}

}  // namespace
