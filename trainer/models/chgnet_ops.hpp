// SPDX-License-Identifier: MIT
#pragma once
/// \file CHGNet's two bases as KernelOps (kernel_function.hpp) on the core's kernels
/// (kernels/radial_basis_kokkos.hpp), with learnable frequencies, as chgnet trains them
/// (learnable_rbf = true):
///
///   op             inputs                       output
///   ChgnetBessel   r [E], w [N] (1/A)           B [E, N]    B_n = c sin(w_n r) / r f_p(r / r_cut)
///   ChgnetFourier  theta [A], k [K]             F [A, 1+2K] [1/sqrt2, sin(k theta), cos(k theta)] / sqrt(pi)
///
/// The frequencies are inputs of the op, so their gradient comes from the kernels'
/// reverse_frequencies stage. The double backward runs the kernels on Dual numbers of r (or
/// theta); the kernels take their frequencies as plain numbers, so a tangent on the
/// frequencies is not representable. Training never needs one: the force loss differentiates
/// dE/dr (whose cotangent is the tangent of r here), not dE/dw. The op refuses a non-zero
/// frequency tangent rather than drop it (UnsupportedError).
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "models/kernel_ops.hpp"

namespace fastmlip::trainer {

namespace chgnet_ops_detail {

template <class T>
std::vector<double> frequencies_of(const torch::Tensor& w) {
  return ops_detail::to_double<T>(w);
}

/// Throws when a frequency tangent is non-zero (see the file comment).
inline void refuse_frequency_tangent(const torch::Tensor& tangent, const std::string& op) {
  if (tangent.defined() && tangent.numel() > 0 && tangent.abs().max().item<double>() != 0.0) {
    throw UnsupportedError(op +
                           ": second derivatives through the basis frequencies are not available (the "
                           "kernels take no frequency tangent); differentiate forces, not dE/dfrequency");
  }
}

}  // namespace chgnet_ops_detail

/// B = RadialBessel(r; w) with CHGNet's envelope (p = cutoff_coeff) and prefactor sqrt(2 / r_cut).
template <class T>
class ChgnetBesselOp final : public KernelOp {
 public:
  ChgnetBesselOp(double r_cut, int p, std::string name) : m_rc(r_cut), m_p(p), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    const auto k = kernel<T>(in[1]);
    torch::Tensor B = ops_detail::zeros<T>({in[0].size(0), in[1].size(0)});
    k.compute(ops_detail::vec<T>(in[0]), ops_detail::mat<T>(B));
    return B;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    const auto k = kernel<T>(in[1]);
    torch::Tensor gr = ops_detail::zeros<T>({in[0].size(0)}), gw = ops_detail::zeros<T>({in[1].size(0)});
    k.reverse(ops_detail::vec<T>(in[0]), ops_detail::mat<T>(g), ops_detail::vec<T>(gr));
    k.reverse_frequencies(ops_detail::vec<T>(in[0]), ops_detail::mat<T>(g), ops_detail::vec<T>(gw));
    return {gr, gw};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    chgnet_ops_detail::refuse_frequency_tangent(tangent[1], m_name);
    const auto k = kernel<Dual<T>>(in[1]);
    const auto E = in[0].size(0), N = in[1].size(0);
    auto r = ops_detail::pack<T>(in[0], tangent[0]);
    auto gd = ops_detail::pack<T>(g, torch::Tensor());
    std::vector<Dual<T>> B(static_cast<std::size_t>(E * N)), gr(static_cast<std::size_t>(E)),
        gw(static_cast<std::size_t>(N));
    const ops_detail::Vec<Dual<T>> rv(r.data(), E);
    const auto gv = ops_detail::dmat<T>(gd, E, N);
    k.compute(rv, ops_detail::dmat<T>(B, E, N));
    k.reverse(rv, gv, ops_detail::Vec<Dual<T>>(gr.data(), E));
    k.reverse_frequencies(rv, gv, ops_detail::Vec<Dual<T>>(gw.data(), N));
    return {ops_detail::tangents<T>(B, {E, N}),
            {ops_detail::tangents<T>(gr, {E}), ops_detail::tangents<T>(gw, {N})}};
  }

 private:
  /// The kernel for the current frequencies (an upload of N numbers per call).
  template <class S>
  kernels::RadialBesselKokkos<KernelExec, S> kernel(const torch::Tensor& w) const {
    kernels::RadialBesselParams p;
    p.frequencies = chgnet_ops_detail::frequencies_of<T>(w);
    p.r_max = m_rc;
    p.envelope_p = m_p;
    return kernels::RadialBesselKokkos<KernelExec, S>(p);
  }
  double m_rc;
  int m_p;
  std::string m_name;
};

/// F = Fourier(theta; k), CHGNet's angle basis.
template <class T>
class ChgnetFourierOp final : public KernelOp {
 public:
  std::string name() const override { return "angle_basis_expansion"; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    const auto k = kernel<T>(in[1]);
    torch::Tensor F = ops_detail::zeros<T>({in[0].size(0), k.width()});
    k.compute(ops_detail::vec<T>(in[0]), ops_detail::mat<T>(F));
    return F;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    const auto k = kernel<T>(in[1]);
    torch::Tensor gt = ops_detail::zeros<T>({in[0].size(0)}), gk = ops_detail::zeros<T>({in[1].size(0)});
    k.reverse(ops_detail::vec<T>(in[0]), ops_detail::mat<T>(g), ops_detail::vec<T>(gt));
    k.reverse_frequencies(ops_detail::vec<T>(in[0]), ops_detail::mat<T>(g), ops_detail::vec<T>(gk));
    return {gt, gk};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    chgnet_ops_detail::refuse_frequency_tangent(tangent[1], name());
    const auto k = kernel<Dual<T>>(in[1]);
    const auto A = in[0].size(0), K = in[1].size(0), W = static_cast<std::int64_t>(k.width());
    auto t = ops_detail::pack<T>(in[0], tangent[0]);
    auto gd = ops_detail::pack<T>(g, torch::Tensor());
    std::vector<Dual<T>> F(static_cast<std::size_t>(A * W)), gt(static_cast<std::size_t>(A)),
        gk(static_cast<std::size_t>(K));
    const ops_detail::Vec<Dual<T>> tv(t.data(), A);
    const auto gv = ops_detail::dmat<T>(gd, A, W);
    k.compute(tv, ops_detail::dmat<T>(F, A, W));
    k.reverse(tv, gv, ops_detail::Vec<Dual<T>>(gt.data(), A));
    k.reverse_frequencies(tv, gv, ops_detail::Vec<Dual<T>>(gk.data(), K));
    return {ops_detail::tangents<T>(F, {A, W}),
            {ops_detail::tangents<T>(gt, {A}), ops_detail::tangents<T>(gk, {K})}};
  }

 private:
  template <class S>
  kernels::FourierKokkos<KernelExec, S> kernel(const torch::Tensor& k) const {
    kernels::FourierParams p;
    p.frequencies = chgnet_ops_detail::frequencies_of<T>(k);
    return kernels::FourierKokkos<KernelExec, S>(p);
  }
};

}  // namespace fastmlip::trainer
