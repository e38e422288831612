// SPDX-License-Identifier: MIT
#pragma once
// clang-format off
/// \file CHGNet's core kernels as KernelOps (kernel_function.hpp): its two bases (kernels/
/// radial_basis_kokkos.hpp) with learnable frequencies, as chgnet trains them (learnable_rbf =
/// true), and its dense layers, LayerNorm and gated MLPs (kernels/dense.hpp, layer_norm.hpp,
/// gated_mlp.hpp), the same kernels the pair style's ChgnetModel runs:
///
///   op             inputs                          output
///   ChgnetBessel   r [E], w [N] (1/A)              B [E, N]    B_n = c sin(w_n r) / r f_p(r / r_cut)
///   ChgnetFourier  theta [A], k [K]                F [A, 1+2K] [1/sqrt2, sin(k theta), cos(k theta)] / sqrt(pi)
///   Dense          x [R, in], W [out, in], (b)     y [R, out]  x W^T + b (torch's nn.Linear)
///   LayerNorm      x [R, d], gamma [d], beta [d]   y [R, d]    torch's LayerNorm, eps 1e-5
///   GatedMlp       z [R, in], weights...           y [R, out]  chgnet's GatedMLP; weights in
///                                                              GatedMlpWeights::parts() order
///
/// The basis ops' frequencies are inputs, so their gradient comes from the kernels'
/// reverse_frequencies stage. The kernels read them where the tensors keep them (the kernels'
/// learnable constructors): no copy to the host, no upload, per call. Their double backward
/// runs the kernels on Dual numbers of r (or theta) and of the frequencies, so a tangent on
/// either is carried: the force loss's (a tangent on r) and that of a loss on dE/dfrequency.
///
/// The dense ops take every input as differentiable, weights included: their double backward
/// runs the kernels' compute and reverse stages on Dual<T> (whose products are three SIMD
/// GEMMs, kernels/impl/rows_impl.hpp).
// clang-format on
#include <torch/torch.h>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/dense.hpp"
#include "kernels/gated_mlp.hpp"
#include "kernels/layer_norm.hpp"
#include "models/kernel_ops.hpp"

namespace fastmlip::trainer {

/// A basis kernel with learnable frequencies as an op: inputs x [n] (r or theta) and the
/// frequencies [K]; output [n, width]. `Params` holds what is fixed (cutoff, envelope); the
/// kernel reads the frequencies from the input tensor itself. Device-generic as kernel_ops.hpp's
/// ops are.
template <class T, template <class, class> class Kernel, class Params, class Exec = KernelExec>
class BasisWithFrequenciesOp final : public KernelOp {
 public:
  BasisWithFrequenciesOp(Params fixed, std::string name)
      : m_fixed(std::move(fixed)), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    const auto k = kernel<T>(ops_detail::vec<T, Exec>(in[1]));
    torch::Tensor out = ops_detail::zeros<T>({in[0].size(0), width(k)}, in[0]);
    k.compute(ops_detail::vec<T, Exec>(in[0]), ops_detail::mat<T, Exec>(out));
    return out;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    const auto k = kernel<T>(ops_detail::vec<T, Exec>(in[1]));
    torch::Tensor gx = ops_detail::zeros<T>({in[0].size(0)}, in[0]),
                  gw = ops_detail::zeros<T>({in[1].size(0)}, in[0]);
    k.reverse(ops_detail::vec<T, Exec>(in[0]), ops_detail::mat<T, Exec>(g), ops_detail::vec<T, Exec>(gx));
    k.reverse_frequencies(ops_detail::vec<T, Exec>(in[0]), ops_detail::mat<T, Exec>(g),
                          ops_detail::vec<T, Exec>(gw));
    return {gx, gw};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    const auto w = ops_detail::duals<T>(in[1], tangent[1]);
    const auto k = kernel<Dual<T>>(ops_detail::dvec<T, Exec>(w));
    const auto n = in[0].size(0), K = in[1].size(0), W = width(k);
    const auto x = ops_detail::duals<T>(in[0], tangent[0]);
    const auto gd = ops_detail::duals<T>(g, torch::Tensor());
    auto out = ops_detail::dual_zeros<T>({n, W}, g), gx = ops_detail::dual_zeros<T>({n}, g),
         gw = ops_detail::dual_zeros<T>({K}, g);
    const auto xv = ops_detail::dvec<T, Exec>(x);
    const auto gv = ops_detail::dmat<T, Exec>(gd);
    k.compute(xv, ops_detail::dmat<T, Exec>(out));
    k.reverse(xv, gv, ops_detail::dvec<T, Exec>(gx));
    k.reverse_frequencies(xv, gv, ops_detail::dvec<T, Exec>(gw));
    return {ops_detail::tangent_of<T>(out), {ops_detail::tangent_of<T>(gx), ops_detail::tangent_of<T>(gw)}};
  }

 private:
  template <class S>
  Kernel<Exec, S> kernel(Kokkos::View<S*, Exec> frequencies) const {
    if constexpr (std::is_same_v<Params, kernels::FourierParams>) {
      return Kernel<Exec, S>(frequencies);
    } else {
      return Kernel<Exec, S>(m_fixed, frequencies);
    }
  }
  template <class S>
  static std::int64_t width(const kernels::RadialBasisKokkos<Exec, S>& k) {
    return k.num_basis();
  }
  template <class S>
  static std::int64_t width(const kernels::FourierKokkos<Exec, S>& k) {
    return k.width();
  }
  Params m_fixed;
  std::string m_name;
};

/// B = RadialBessel(r; w), w = f / r_cut: inputs r [E] and w [N].
template <class T, class Exec = KernelExec>
using ChgnetBesselOp =
    BasisWithFrequenciesOp<T, kernels::RadialBasisKokkos, kernels::RadialBasisParams, Exec>;
/// F = Fourier(theta; k): inputs theta [A] and k [K].
template <class T, class Exec = KernelExec>
using ChgnetFourierOp = BasisWithFrequenciesOp<T, kernels::FourierKokkos, kernels::FourierParams, Exec>;

// ---- dense layers, LayerNorm, gated MLPs -----------------------------------------------------

namespace chgnet_ops_detail {

/// A tensor's values as S (T, or Dual<T> with the tangent's values; an undefined tangent is 0).
template <class T, class S>
std::vector<S> values(const torch::Tensor& t, const torch::Tensor& tangent = torch::Tensor()) {
  if constexpr (std::is_same_v<S, T>) {
    const auto c = t.contiguous();
    return std::vector<S>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
  } else {
    return ops_detail::pack<T>(t, tangent);
  }
}
/// S values as a tensor: the values for S = T, the tangents for S = Dual<T>.
template <class T, class S>
torch::Tensor tensor_of(const std::vector<S>& v, std::vector<std::int64_t> shape) {
  if constexpr (std::is_same_v<S, T>) {
    torch::Tensor out = torch::empty(shape, torch::TensorOptions().dtype(torch_dtype<T>()));
    std::copy(v.begin(), v.end(), out.data_ptr<T>());
    return out;
  } else {
    return ops_detail::tangents<T>(v, std::move(shape));
  }
}

}  // namespace chgnet_ops_detail

/// A dense-family kernel as an op. `Stages` has, for S = T and Dual<T>:
///   std::vector<S> compute(const std::vector<std::vector<S>>& in, int rows) const
///   std::vector<std::vector<S>> reverse(const std::vector<std::vector<S>>& in, const std::vector<S>& gy, int rows) const
/// with in[0] the rows' input; this class converts tensors and forms the double backward.
template <class T, class Stages>
class DenseFamilyOp final : public KernelOp {
 public:
  DenseFamilyOp(Stages stages, std::string name) : m_stages(std::move(stages)), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    const auto rows = in[0].size(0);
    const auto y = m_stages.compute(inputs<T>(in, {}), static_cast<int>(rows));
    return chgnet_ops_detail::tensor_of<T, T>(y, {rows, m_stages.width_out()});
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in, const torch::Tensor& g) const override {
    const auto grads = m_stages.reverse(inputs<T>(in, {}), chgnet_ops_detail::values<T, T>(g),
                                        static_cast<int>(in[0].size(0)));
    return outputs<T>(grads, in);
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(const std::vector<torch::Tensor>& in,
                                                                       const std::vector<torch::Tensor>& tangent,
                                                                       const torch::Tensor& g) const override {
    using D = Dual<T>;
    const auto rows = in[0].size(0);
    const auto x = inputs<D>(in, tangent);
    const auto y = m_stages.compute(x, static_cast<int>(rows));
    const auto grads = m_stages.reverse(x, chgnet_ops_detail::values<T, D>(g, torch::Tensor()), static_cast<int>(rows));
    return {chgnet_ops_detail::tensor_of<T, D>(y, {rows, m_stages.width_out()}), outputs<D>(grads, in)};
  }

 private:
  template <class S>
  static std::vector<std::vector<S>> inputs(const std::vector<torch::Tensor>& in,
                                            const std::vector<torch::Tensor>& tangent) {
    std::vector<std::vector<S>> out;
    for (std::size_t k = 0; k < in.size(); ++k) {
      out.push_back(chgnet_ops_detail::values<T, S>(in[k], k < tangent.size() ? tangent[k] : torch::Tensor()));
    }
    return out;
  }
  template <class S>
  static std::vector<torch::Tensor> outputs(const std::vector<std::vector<S>>& grads,
                                            const std::vector<torch::Tensor>& like) {
    std::vector<torch::Tensor> out;
    for (std::size_t k = 0; k < grads.size(); ++k) {
      out.push_back(chgnet_ops_detail::tensor_of<T, S>(grads[k], like[k].sizes().vec()));
    }
    return out;
  }
  Stages m_stages;
  std::string m_name;
};

/// y = x W^T (+ b): inputs x, W and, with `bias`, b.
struct DenseStages {
  int in = 0, out = 0;
  bool bias = false;
  std::int64_t width_out() const { return out; }
  template <class S>
  std::vector<S> compute(const std::vector<std::vector<S>>& v, int rows) const {
    const kernels::Dense<S> d(in, out, v[1].data(), bias ? v[2].data() : nullptr);
    std::vector<S> y(static_cast<std::size_t>(rows) * out);
    d.compute(v[0].data(), rows, in, y.data(), out);
    return y;
  }
  template <class S>
  std::vector<std::vector<S>> reverse(const std::vector<std::vector<S>>& v, const std::vector<S>& gy, int rows) const {
    const kernels::Dense<S> d(in, out, v[1].data(), nullptr);
    std::vector<std::vector<S>> g{std::vector<S>(v[0].size()), std::vector<S>(v[1].size(), S(0))};
    if (bias) g.emplace_back(static_cast<std::size_t>(out), S(0));
    d.reverse(gy.data(), rows, out, g[0].data(), in, false);
    d.reverse_weights(v[0].data(), in, gy.data(), out, rows, g[1].data(), bias ? g[2].data() : nullptr);
    return g;
  }
};

/// LayerNorm over rows of `dim`: inputs x, gamma, beta.
struct LayerNormStages {
  int dim = 0;
  std::int64_t width_out() const { return dim; }
  template <class S>
  std::vector<S> compute(const std::vector<std::vector<S>>& v, int rows) const {
    std::vector<S> y = v[0], yhat(y.size()), inv(static_cast<std::size_t>(rows));
    kernels::LayerNorm<S>{dim, v[1], v[2]}.compute_rows(y.data(), yhat.data(), inv.data(), rows);
    return y;
  }
  template <class S>
  std::vector<std::vector<S>> reverse(const std::vector<std::vector<S>>& v, const std::vector<S>& gy, int rows) const {
    const kernels::LayerNorm<S> ln{dim, v[1], v[2]};
    std::vector<S> y = v[0], yhat(y.size()), inv(static_cast<std::size_t>(rows));
    ln.compute_rows(y.data(), yhat.data(), inv.data(), rows);
    std::vector<std::vector<S>> g{gy, std::vector<S>(dim, S(0)), std::vector<S>(dim, S(0))};
    ln.reverse_weights(gy.data(), yhat.data(), rows, g[1].data(), g[2].data());
    ln.reverse_rows(g[0].data(), yhat.data(), inv.data(), rows);
    return g;
  }
};

/// chgnet's GatedMLP: inputs z, then the weights in GatedMlpWeights::parts() order.
struct GatedMlpStages {
  int in = 0, hidden = 0, out = 0;
  bool norm = true;
  std::int64_t width_out() const { return out; }
  template <class S>
  kernels::GatedMlp<S> kernel(const std::vector<std::vector<S>>& v) const {
    kernels::GatedMlpWeights<S> w;
    w.in = in, w.hidden = hidden, w.out = out, w.norm = norm;
    auto parts = w.parts();
    for (std::size_t k = 0; k < parts.size(); ++k) *parts[k] = v[1 + k];
    return kernels::GatedMlp<S>(w, {});
  }
  template <class S>
  std::vector<S> compute(const std::vector<std::vector<S>>& v, int rows) const {
    std::vector<S> y(static_cast<std::size_t>(rows) * out);
    kernel(v).compute(v[0].data(), rows, y.data());
    return y;
  }
  template <class S>
  std::vector<std::vector<S>> reverse(const std::vector<std::vector<S>>& v, const std::vector<S>& gy, int rows) const {
    const auto m = kernel(v);
    kernels::GatedMlpWeights<S> shape;
    shape.in = in, shape.hidden = hidden, shape.out = out, shape.norm = norm;
    auto gw = shape.zeros_like();
    std::vector<std::vector<S>> g{std::vector<S>(v[0].size())};
    m.reverse(v[0].data(), gy.data(), rows, g[0].data(), &gw);
    for (auto* p : gw.parts()) g.push_back(std::move(*p));
    return g;
  }
};

template <class T>
using DenseOp = DenseFamilyOp<T, DenseStages>;
template <class T>
using LayerNormOp = DenseFamilyOp<T, LayerNormStages>;
template <class T>
using GatedMlpOp = DenseFamilyOp<T, GatedMlpStages>;

}  // namespace fastmlip::trainer
