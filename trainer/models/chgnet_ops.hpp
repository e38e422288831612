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

/// A basis kernel with learnable frequencies as an op: inputs x [n] (r or theta) and the
/// frequencies [K]; output [n, width]. `Params` holds what is fixed (cutoff, envelope); its
/// frequencies are replaced by the input's at each call (an upload of K numbers).
template <class T, template <class, class> class Kernel, class Params>
class BasisWithFrequenciesOp final : public KernelOp {
 public:
  BasisWithFrequenciesOp(Params fixed, std::string name)
      : m_fixed(std::move(fixed)), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    const auto k = kernel<T>(in[1]);
    torch::Tensor out = ops_detail::zeros<T>({in[0].size(0), width(k)});
    k.compute(ops_detail::vec<T>(in[0]), ops_detail::mat<T>(out));
    return out;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    const auto k = kernel<T>(in[1]);
    torch::Tensor gx = ops_detail::zeros<T>({in[0].size(0)}), gw = ops_detail::zeros<T>({in[1].size(0)});
    k.reverse(ops_detail::vec<T>(in[0]), ops_detail::mat<T>(g), ops_detail::vec<T>(gx));
    k.reverse_frequencies(ops_detail::vec<T>(in[0]), ops_detail::mat<T>(g), ops_detail::vec<T>(gw));
    return {gx, gw};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    chgnet_ops_detail::refuse_frequency_tangent(tangent[1], m_name);
    const auto k = kernel<Dual<T>>(in[1]);
    const auto n = in[0].size(0), K = in[1].size(0), W = width(k);
    auto x = ops_detail::pack<T>(in[0], tangent[0]);
    auto gd = ops_detail::pack<T>(g, torch::Tensor());
    std::vector<Dual<T>> out(static_cast<std::size_t>(n * W)), gx(static_cast<std::size_t>(n)),
        gw(static_cast<std::size_t>(K));
    const ops_detail::Vec<Dual<T>> xv(x.data(), n);
    const auto gv = ops_detail::dmat<T>(gd, n, W);
    k.compute(xv, ops_detail::dmat<T>(out, n, W));
    k.reverse(xv, gv, ops_detail::Vec<Dual<T>>(gx.data(), n));
    k.reverse_frequencies(xv, gv, ops_detail::Vec<Dual<T>>(gw.data(), K));
    return {ops_detail::tangents<T>(out, {n, W}),
            {ops_detail::tangents<T>(gx, {n}), ops_detail::tangents<T>(gw, {K})}};
  }

 private:
  template <class S>
  Kernel<KernelExec, S> kernel(const torch::Tensor& frequencies) const {
    Params p = m_fixed;
    p.frequencies = chgnet_ops_detail::frequencies_of<T>(frequencies);
    return Kernel<KernelExec, S>(p);
  }
  template <class S>
  static std::int64_t width(const kernels::RadialBesselKokkos<KernelExec, S>& k) {
    return k.num_basis();
  }
  template <class S>
  static std::int64_t width(const kernels::FourierKokkos<KernelExec, S>& k) {
    return k.width();
  }
  Params m_fixed;
  std::string m_name;
};

/// B = RadialBessel(r; w), w = f / r_cut: inputs r [E] and w [N].
template <class T>
using ChgnetBesselOp = BasisWithFrequenciesOp<T, kernels::RadialBesselKokkos, kernels::RadialBesselParams>;
/// F = Fourier(theta; k): inputs theta [A] and k [K].
template <class T>
using ChgnetFourierOp = BasisWithFrequenciesOp<T, kernels::FourierKokkos, kernels::FourierParams>;

}  // namespace fastmlip::trainer
