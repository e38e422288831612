// SPDX-License-Identifier: MIT
#pragma once
/// \file A core kernel as a LibTorch autograd function, twice differentiable.
///
/// A kernel y = f(x_1..x_n) (inputs and weights alike) is wrapped by two autograd functions:
///
///   KernelFunction          forward: the compute stage        backward: KernelBackwardFunction
///   KernelBackwardFunction  forward: the reverse stage,       backward: the kernel on dual numbers
///                           g_k = (df/dx_k)^T gy  for every k
///
/// Training on forces differentiates the energy with create_graph (forces = -dE/dr), which runs
/// KernelFunction::backward with the graph recorded, i.e. it applies KernelBackwardFunction;
/// the loss backward then needs the backward of that. For cotangents a_k of the g_k:
///
///   d/dgy  [sum_k a_k . g_k] = sum_k (df/dx_k) a_k                     (a Jacobian-vector product)
///   d/dx_j [sum_k a_k . g_k] = d/d eps [(df/dx_j)^T gy](x + eps a)      (a Hessian-vector product)
///
/// Both are what one run of the kernel's compute and reverse stages on Dual<T> numbers
/// x + eps a returns in its tangents (math/dual.hpp): the output's tangent is the first, the
/// tangents of the reverse stage's gradients the second. That is exact (the chain rule on the
/// kernel's own operations, no step size) and needs no hand-written second derivative per
/// kernel, which is why it was chosen over a second pair of hand-written stages: every core
/// kernel already runs on Dual<T> (tests/kernels/test_double_backward.cpp checks each against
/// finite differences). Third derivatives are not provided: KernelBackwardFunction's backward
/// refuses to run with the graph recorded rather than return a silently wrong result.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace fastmlip::trainer {

/// One core kernel bound to what does not change inside a batch (its tables, species, edge
/// index): the three things KernelFunction needs from it. Inputs are dense, contiguous
/// tensors of the kernel's precision on one device; every stage returns new tensors.
class KernelOp : public torch::CustomClassHolder {
 public:
  ~KernelOp() override = default;
  /// For messages: "linear_up (layer 0)".
  virtual std::string name() const = 0;
  /// The compute stage.
  virtual torch::Tensor compute(const std::vector<torch::Tensor>& in) const = 0;
  /// The reverse stage: d(sum(out * grad_out))/d in_k for every input k, weights included.
  virtual std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                             const torch::Tensor& grad_out) const = 0;
  /// compute and reverse on dual numbers in + eps * tangent (grad_out without tangent): the
  /// tangent of the output and the tangents of the reverse stage's gradients.
  virtual std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& grad_out) const = 0;
};

namespace detail {

inline c10::intrusive_ptr<KernelOp> op_of(torch::autograd::AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<KernelOp>(ctx->saved_data.at("op").toCapsule());
}

/// Zeros where autograd passes an undefined gradient (an output nobody used).
inline torch::Tensor defined_or_zeros(const torch::Tensor& g, const torch::Tensor& like) {
  return g.defined() ? g.contiguous() : torch::zeros_like(like);
}

struct KernelBackwardFunction : public torch::autograd::Function<KernelBackwardFunction> {
  /// args = the kernel's inputs, then the output's cotangent.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                c10::intrusive_ptr<KernelOp> op, at::TensorList args) {
    ctx->saved_data["op"] = c10::IValue::make_capsule(op);
    ctx->save_for_backward(args.vec());
    const std::vector<torch::Tensor> in(args.begin(), args.end() - 1);
    auto grads = op->reverse(in, args.back());
    for (std::size_t k = 0; k < grads.size(); ++k) {
      grads[k] = defined_or_zeros(grads[k], in[k]);
    }
    return grads;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_grads) {
    const auto op = op_of(ctx);
    if (torch::GradMode::is_enabled()) {
      throw UnsupportedError("KernelBackwardFunction (" + op->name() +
                             "): third derivatives of the core kernels are not available; differentiate the "
                             "force loss without create_graph");
    }
    const auto saved = ctx->get_saved_variables();
    const std::vector<torch::Tensor> in(saved.begin(), saved.end() - 1);
    std::vector<torch::Tensor> tangent(in.size());
    for (std::size_t k = 0; k < in.size(); ++k) {
      tangent[k] = defined_or_zeros(grad_grads[k], in[k]);
    }
    auto [jvp, hvp] = op->reverse_tangent(in, tangent, saved.back());
    torch::autograd::variable_list out;
    out.reserve(in.size() + 2);
    out.emplace_back();  // the op
    for (auto& h : hvp) {
      out.push_back(std::move(h));
    }
    out.push_back(std::move(jvp));
    return out;
  }
};

struct KernelFunction : public torch::autograd::Function<KernelFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, c10::intrusive_ptr<KernelOp> op,
                               at::TensorList in) {
    ctx->saved_data["op"] = c10::IValue::make_capsule(op);
    ctx->save_for_backward(in.vec());
    return op->compute(std::vector<torch::Tensor>(in.begin(), in.end()));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto args = ctx->get_saved_variables();
    if (!grad_out[0].defined()) {
      return torch::autograd::variable_list(args.size() + 1);  // undefined: zero for every input
    }
    args.push_back(grad_out[0].contiguous());
    // A TensorList, not the vector: Function::apply counts a list's elements as inputs (one
    // gradient each), while a std::vector would match its catch-all and be taken for a constant.
    auto grads = KernelBackwardFunction::apply(op_of(ctx), at::TensorList(args));
    torch::autograd::variable_list out;
    out.reserve(grads.size() + 1);
    out.emplace_back();  // the op
    for (auto& g : grads) {
      out.push_back(std::move(g));
    }
    return out;
  }
};

}  // namespace detail

/// y = op(in...), differentiable twice with respect to every input.
inline torch::Tensor apply_kernel(const c10::intrusive_ptr<KernelOp>& op,
                                  const std::vector<torch::Tensor>& in) {
  std::vector<torch::Tensor> args;
  args.reserve(in.size());
  for (const auto& t : in) {
    args.push_back(t.contiguous());
  }
  return detail::KernelFunction::apply(op, at::TensorList(args));
}

}  // namespace fastmlip::trainer
