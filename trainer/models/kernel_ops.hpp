// SPDX-License-Identifier: MIT
#pragma once
// clang-format off
/// \file The core kernels a MACE forward pass runs, each as a KernelOp (kernel_function.hpp):
/// compute stage, reverse stage (input and weight gradients) and their Dual<T> twins for the
/// double backward. T is float or double, the precision of the tensors; the kernels run on
/// Kokkos' default host execution space, as the plugin's MaceModel does.
///
///   op              inputs                          output
///   SphericalHarm.  u [E, 3]                        Y [E, (lmax+1)^2]        math/spherical_harmonics.hpp
///   Bessel          r [E]                           B [E, num_bessel]        kernels/radial_basis_kokkos.hpp
///   RadialMLP       B [E, n_0], W_l [n_l, n_l+1]    R [E, n_L]               kernels/radial_mlp_kokkos.hpp
///   ChannelwiseTP   x [N, d1], Y [E, d2], R [E, w]  A [N, d_out]             kernels/channelwise_tp_kokkos.hpp
///   Linear          x [n, d_in], W [sets, w]        y [n, d_out]             kernels/linear_kokkos.hpp
///   SymContraction  x [n, d_in], W_(o,nu) [E, K, C] B [n, d_out]             kernels/symmetric_contraction_kokkos.hpp
///   JointEmbedding  its weights (tensors())         s [G, C]                 models/mace/graph_embedding.hpp
// clang-format on
#include <torch/torch.h>

#include <Kokkos_Core.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernel_function.hpp"
#include "kernels/channelwise_tp_kokkos.hpp"
#include "kernels/distance_transform.hpp"
#include "kernels/edge_index.hpp"
#include "kernels/linear_kokkos.hpp"
#include "kernels/radial_basis_kokkos.hpp"
#include "kernels/radial_mlp_kokkos.hpp"
#include "kernels/symmetric_contraction_kokkos.hpp"
#include "math/dual.hpp"
#include "math/spherical_harmonics.hpp"
#include "models/mace/graph_embedding.hpp"

namespace fastmlip::trainer {

using KernelExec = Kokkos::DefaultHostExecutionSpace;

template <class T>
constexpr torch::Dtype torch_dtype() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "torch_dtype: T must be float or double");
  return std::is_same_v<T, double> ? torch::kFloat64 : torch::kFloat32;
}

namespace ops_detail {

template <class S>
using Mat = Kokkos::View<S**, Kokkos::LayoutRight, KernelExec>;
template <class S>
using Vec = Kokkos::View<S*, KernelExec>;
using Labels = Kokkos::View<const int*, KernelExec>;

template <class T>
torch::Tensor zeros(std::initializer_list<std::int64_t> shape) {
  return torch::zeros(shape, torch::TensorOptions().dtype(torch_dtype<T>()));
}

/// Uninitialised, for outputs a kernel writes in full.
template <class T>
torch::Tensor empty(std::initializer_list<std::int64_t> shape) {
  return torch::empty(shape, torch::TensorOptions().dtype(torch_dtype<T>()));
}

/// A 2-D view of a contiguous tensor's storage (no copy).
template <class T>
Mat<T> mat(const torch::Tensor& t) {
  return Mat<T>(t.data_ptr<T>(), t.size(0), t.size(1));
}
template <class T>
Vec<T> vec(const torch::Tensor& t) {
  return Vec<T>(t.data_ptr<T>(), t.size(0));
}

/// Dual numbers value + eps * tangent from two tensors of one shape (tangent may be undefined: 0).
template <class T>
std::vector<Dual<T>> pack(const torch::Tensor& value, const torch::Tensor& tangent) {
  const auto v = value.contiguous();
  const T* pv = v.data_ptr<T>();
  std::vector<Dual<T>> out(static_cast<std::size_t>(v.numel()));
  torch::Tensor d;
  const T* pd = nullptr;
  if (tangent.defined()) {
    d = tangent.contiguous();
    pd = d.data_ptr<T>();
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = Dual<T>(pv[i], pd ? pd[i] : T(0));
  }
  return out;
}

/// The tangent parts of dual numbers as a tensor of `shape`.
template <class T, class D>
torch::Tensor tangents(const std::vector<D>& x, std::vector<std::int64_t> shape) {
  torch::Tensor out = torch::empty(shape, torch::TensorOptions().dtype(torch_dtype<T>()));
  T* p = out.data_ptr<T>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    p[i] = static_cast<T>(x[i].d);
  }
  return out;
}

template <class T>
Mat<Dual<T>> dmat(std::vector<Dual<T>>& x, std::int64_t rows, std::int64_t cols) {
  return Mat<Dual<T>>(x.data(), rows, cols);
}

template <class T>
std::vector<double> to_double(const torch::Tensor& t) {
  const auto c = t.contiguous();
  const T* p = c.data_ptr<T>();
  return std::vector<double>(p, p + c.numel());
}

template <class T, class S>
torch::Tensor from_values(const std::vector<S>& values, std::vector<std::int64_t> shape) {
  torch::Tensor out = torch::empty(shape, torch::TensorOptions().dtype(torch_dtype<T>()));
  T* p = out.data_ptr<T>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    p[i] = static_cast<T>(value_of(values[i]));
  }
  return out;
}

}  // namespace ops_detail

// ---- spherical harmonics ------------------------------------------------------------------

/// Y = SH(u): e3nn's o3.SphericalHarmonics(lmax, normalize=True, "component").
template <class T>
class SphericalHarmonicsOp final : public KernelOp {
 public:
  explicit SphericalHarmonicsOp(int lmax) : m_lmax(lmax) {}
  std::string name() const override { return "spherical harmonics"; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    const auto E = in[0].size(0);
    torch::Tensor Y = ops_detail::zeros<T>({E, width()});
    compute_spherical_harmonics(m_lmax, static_cast<std::size_t>(E), in[0].data_ptr<T>(), Y.data_ptr<T>());
    return Y;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    const auto E = in[0].size(0);
    torch::Tensor gu = ops_detail::zeros<T>({E, 3});
    reverse_spherical_harmonics(m_lmax, static_cast<std::size_t>(E), in[0].data_ptr<T>(), g.data_ptr<T>(),
                                gu.data_ptr<T>());
    return {gu};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    const auto E = in[0].size(0);
    auto u = ops_detail::pack<T>(in[0], tangent[0]);
    auto gd = ops_detail::pack<T>(g, torch::Tensor());
    std::vector<Dual<T>> Y(static_cast<std::size_t>(E * width())), gu(static_cast<std::size_t>(E * 3));
    compute_spherical_harmonics(m_lmax, static_cast<std::size_t>(E), u.data(), Y.data());
    reverse_spherical_harmonics(m_lmax, static_cast<std::size_t>(E), u.data(), gd.data(), gu.data());
    return {ops_detail::tangents<T>(Y, {E, width()}), {ops_detail::tangents<T>(gu, {E, 3})}};
  }

 private:
  std::int64_t width() const { return (m_lmax + 1) * (m_lmax + 1); }
  int m_lmax;
};

// ---- radial basis ---------------------------------------------------------------------------

/// B = b(r) x polynomial envelope (mace-torch's radial_embedding; b Bessel, Gaussian or
/// Chebyshev). The basis constants are fixed (mace-torch's default, trainable=False): only r is
/// an input.
template <class T>
class RadialBasisOp final : public KernelOp {
 public:
  explicit RadialBasisOp(const kernels::RadialBasisParams& p) : m_k(p), m_kd(p), m_n(p.num_basis()) {}
  std::string name() const override { return "radial basis"; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    torch::Tensor B = ops_detail::zeros<T>({in[0].size(0), m_n});
    m_k.compute(ops_detail::vec<T>(in[0]), ops_detail::mat<T>(B));
    return B;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    torch::Tensor gr = ops_detail::zeros<T>({in[0].size(0)});
    m_k.reverse(ops_detail::vec<T>(in[0]), ops_detail::mat<T>(g), ops_detail::vec<T>(gr));
    return {gr};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    const auto E = in[0].size(0);
    auto r = ops_detail::pack<T>(in[0], tangent[0]);
    auto gd = ops_detail::pack<T>(g, torch::Tensor());
    std::vector<Dual<T>> B(static_cast<std::size_t>(E * m_n)), gr(static_cast<std::size_t>(E));
    const ops_detail::Vec<Dual<T>> rv(r.data(), E);
    m_kd.compute(rv, ops_detail::dmat<T>(B, E, m_n));
    m_kd.reverse(rv, ops_detail::dmat<T>(gd, E, m_n), ops_detail::Vec<Dual<T>>(gr.data(), E));
    return {ops_detail::tangents<T>(B, {E, m_n}), {ops_detail::tangents<T>(gr, {E})}};
  }

 private:
  kernels::RadialBasisKokkos<KernelExec, T> m_k;
  kernels::RadialBasisKokkos<KernelExec, Dual<T>> m_kd;
  std::int64_t m_n;
};

/// B = b(x(r)) x polynomial envelope(r), x the distance transform (Agnesi or Soft) of r for the
/// edge's two elements (mace-torch's radial_embedding with a distance_transform;
/// kernels/distance_transform.hpp). Inputs r [E] and rsum [E], the sum of the edge's two
/// covalent radii: a constant of the species (its gradient is zero). The transform's constants
/// are fixed, as mace-torch's buffers are.
template <class T>
class TransformedBasisOp final : public KernelOp {
 public:
  TransformedBasisOp(const kernels::RadialBasisParams& p, const kernels::DistanceTransformParams& t)
      : m_k(p),
        m_kd(p),
        m_n(p.num_basis()),
        m_t(t.constants()),
        m_name(std::string("radial basis (") + t.name() + ")") {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    const auto E = in[0].size(0);
    torch::Tensor x = ops_detail::zeros<T>({E}), s = ops_detail::zeros<T>({E});
    transform<T>(in[0], in[1], x.data_ptr<T>(), s.data_ptr<T>());
    torch::Tensor B = ops_detail::zeros<T>({E, m_n});
    m_k.compute_at(ops_detail::vec<T>(x), ops_detail::vec<T>(in[0]), ops_detail::mat<T>(B));
    return B;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    const auto E = in[0].size(0);
    torch::Tensor x = ops_detail::zeros<T>({E}), s = ops_detail::zeros<T>({E});
    transform<T>(in[0], in[1], x.data_ptr<T>(), s.data_ptr<T>());
    torch::Tensor gr = ops_detail::zeros<T>({E});
    m_k.reverse_at(ops_detail::vec<T>(x), ops_detail::vec<T>(s), ops_detail::vec<T>(in[0]), ops_detail::mat<T>(g),
                   ops_detail::vec<T>(gr));
    return {gr, ops_detail::zeros<T>({E})};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    const auto E = in[0].size(0);
    auto r = ops_detail::pack<T>(in[0], tangent[0]);
    auto gd = ops_detail::pack<T>(g, torch::Tensor());
    std::vector<Dual<T>> x(static_cast<std::size_t>(E)), s(static_cast<std::size_t>(E));
    const auto rsum = in[1].contiguous();
    for (std::int64_t e = 0; e < E; ++e) {
      kernels::impl::distance_transform(m_t, r[e], Dual<T>(rsum.data_ptr<T>()[e]), x[e], s[e]);
    }
    std::vector<Dual<T>> B(static_cast<std::size_t>(E * m_n)), gr(static_cast<std::size_t>(E));
    const ops_detail::Vec<Dual<T>> rv(r.data(), E), xv(x.data(), E), sv(s.data(), E);
    m_kd.compute_at(xv, rv, ops_detail::dmat<T>(B, E, m_n));
    m_kd.reverse_at(xv, sv, rv, ops_detail::dmat<T>(gd, E, m_n), ops_detail::Vec<Dual<T>>(gr.data(), E));
    return {ops_detail::tangents<T>(B, {E, m_n}),
            {ops_detail::tangents<T>(gr, {E}), ops_detail::zeros<T>({E})}};
  }

 private:
  template <class S>
  void transform(const torch::Tensor& r, const torch::Tensor& rsum, S* x, S* s) const {
    const auto rc = r.contiguous(), rsc = rsum.contiguous();
    for (std::int64_t e = 0; e < rc.numel(); ++e) {
      kernels::impl::distance_transform(m_t, rc.data_ptr<T>()[e], rsc.data_ptr<T>()[e], x[e], s[e]);
    }
  }
  kernels::RadialBasisKokkos<KernelExec, T> m_k;
  kernels::RadialBasisKokkos<KernelExec, Dual<T>> m_kd;
  std::int64_t m_n;
  kernels::DistanceTransformConstants m_t;
  std::string m_name;
};

// ---- radial MLP -----------------------------------------------------------------------------

/// R = MLP(B) (mace-torch's conv_tp_weights). The kernel holds its weights, so one is built
/// per call from the weight tensors (an upload of a few thousand numbers).
template <class T>
class RadialMLPOp final : public KernelOp {
 public:
  RadialMLPOp(const kernels::RadialMLP& shape, std::string name) : m_mlp(shape), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    const auto k = kernel(in);
    torch::Tensor R = ops_detail::empty<T>({in[0].size(0), m_mlp.width_out()});
    k.compute(ops_detail::mat<T>(in[0]), ops_detail::mat<T>(R));
    return R;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    const auto k = kernel(in);
    torch::Tensor gB = ops_detail::empty<T>({in[0].size(0), m_mlp.width_in()});
    const auto gW = k.reverse_all(ops_detail::mat<T>(in[0]), ops_detail::mat<T>(g), ops_detail::mat<T>(gB));
    std::vector<torch::Tensor> out{gB};
    for (int l = 0; l < m_mlp.num_layers(); ++l) {
      out.push_back(ops_detail::from_values<T>(gW[l], {m_mlp.widths[l], m_mlp.widths[l + 1]}));
    }
    return out;
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    kernels::RadialMLP mlp = m_mlp;
    std::vector<std::vector<double>> wt;
    for (int l = 0; l < m_mlp.num_layers(); ++l) {
      mlp.weights[l] = ops_detail::to_double<T>(in[1 + l]);
      wt.push_back(ops_detail::to_double<T>(tangent[1 + l]));
    }
    const kernels::RadialMLPKokkos<KernelExec, Dual<T>> k(mlp, wt);
    const auto E = in[0].size(0);
    auto B = ops_detail::pack<T>(in[0], tangent[0]);
    auto gd = ops_detail::pack<T>(g, torch::Tensor());
    std::vector<Dual<T>> R(static_cast<std::size_t>(E * m_mlp.width_out())),
        gB(static_cast<std::size_t>(E * m_mlp.width_in()));
    const auto Bv = ops_detail::dmat<T>(B, E, m_mlp.width_in());
    const auto gv = ops_detail::dmat<T>(gd, E, m_mlp.width_out());
    const auto gW = k.reverse_all(Bv, gv, ops_detail::dmat<T>(gB, E, m_mlp.width_in()),
                                  ops_detail::dmat<T>(R, E, m_mlp.width_out()));
    std::vector<torch::Tensor> h{ops_detail::tangents<T>(gB, {E, m_mlp.width_in()})};
    for (int l = 0; l < m_mlp.num_layers(); ++l) {
      h.push_back(ops_detail::tangents<T>(gW[l], {m_mlp.widths[l], m_mlp.widths[l + 1]}));
    }
    return {ops_detail::tangents<T>(R, {E, m_mlp.width_out()}), h};
  }

 private:
  kernels::RadialMLPKokkos<KernelExec, T> kernel(const std::vector<torch::Tensor>& in) const {
    kernels::RadialMLP mlp = m_mlp;
    for (int l = 0; l < m_mlp.num_layers(); ++l) {
      mlp.weights[l] = ops_detail::to_double<T>(in[1 + l]);
    }
    return kernels::RadialMLPKokkos<KernelExec, T>(mlp);
  }
  kernels::RadialMLP m_mlp;  ///< widths and activation constant; weights come with each call
  std::string m_name;
};

// ---- channelwise tensor product -------------------------------------------------------------

/// A[n] = sum over edges e into n of TP(x[sender(e)], Y[e], R[e]) (conv_tp and the scatter-sum).
template <class T>
struct ChannelwiseTPKernels {
  explicit ChannelwiseTPKernels(const kernels::ChannelwiseTP& tp) : k(tp), kd(tp) {}
  kernels::ChannelwiseTPKokkos<KernelExec, T> k;
  kernels::ChannelwiseTPKokkos<KernelExec, Dual<T>> kd;
};

template <class T>
class ChannelwiseTPOp final : public KernelOp {
 public:
  ChannelwiseTPOp(std::shared_ptr<const ChannelwiseTPKernels<T>> k,
                  std::shared_ptr<const kernels::EdgeIndex<KernelExec>> graph, std::string name)
      : m_k(std::move(k)), m_graph(std::move(graph)), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    torch::Tensor A = ops_detail::zeros<T>({m_graph->num_nodes, m_k->k.descriptor().dim_out()});
    m_k->k.compute(*m_graph, ops_detail::mat<T>(in[0]), ops_detail::mat<T>(in[1]), ops_detail::mat<T>(in[2]),
                   ops_detail::mat<T>(A));
    return A;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    auto gx = torch::zeros_like(in[0]), gY = torch::zeros_like(in[1]), gw = torch::zeros_like(in[2]);
    m_k->k.reverse(*m_graph, ops_detail::mat<T>(in[0]), ops_detail::mat<T>(in[1]), ops_detail::mat<T>(in[2]),
                   ops_detail::mat<T>(g), ops_detail::mat<T>(gx), ops_detail::mat<T>(gY),
                   ops_detail::mat<T>(gw));
    return {gx, gY, gw};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    std::vector<std::vector<Dual<T>>> d(3), gd(3);
    std::vector<ops_detail::Mat<Dual<T>>> v(3), gv(3);
    for (int k = 0; k < 3; ++k) {
      d[k] = ops_detail::pack<T>(in[k], tangent[k]);
      gd[k].resize(d[k].size());
      v[k] = ops_detail::dmat<T>(d[k], in[k].size(0), in[k].size(1));
      gv[k] = ops_detail::dmat<T>(gd[k], in[k].size(0), in[k].size(1));
    }
    auto go = ops_detail::pack<T>(g, torch::Tensor());
    const auto N = g.size(0), D = g.size(1);
    std::vector<Dual<T>> A(go.size());
    m_k->kd.compute(*m_graph, v[0], v[1], v[2], ops_detail::dmat<T>(A, N, D));
    m_k->kd.reverse(*m_graph, v[0], v[1], v[2], ops_detail::dmat<T>(go, N, D), gv[0], gv[1], gv[2]);
    std::vector<torch::Tensor> h;
    for (int k = 0; k < 3; ++k) {
      h.push_back(ops_detail::tangents<T>(gd[k], {in[k].size(0), in[k].size(1)}));
    }
    return {ops_detail::tangents<T>(A, {N, D}), h};
  }

 private:
  std::shared_ptr<const ChannelwiseTPKernels<T>> m_k;
  std::shared_ptr<const kernels::EdgeIndex<KernelExec>> m_graph;
  std::string m_name;
};

// ---- equivariant linear ---------------------------------------------------------------------

/// o3.Linear (one weight set) or the element-indexed skip_tp (a set per element, chosen by
/// `sets`, the nodes' species as int32).
template <class T>
struct LinearKernels {
  explicit LinearKernels(const kernels::EquivariantLinear& lin) : desc(lin), k(lin), kd(lin) {}
  kernels::EquivariantLinear desc;
  kernels::LinearKokkos<KernelExec, T> k;
  kernels::LinearKokkos<KernelExec, Dual<T>> kd;
};

template <class T>
class LinearOp final : public KernelOp {
 public:
  LinearOp(std::shared_ptr<const LinearKernels<T>> k, torch::Tensor sets, std::string name)
      : m_k(std::move(k)), m_sets(std::move(sets)), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    torch::Tensor y = ops_detail::zeros<T>({in[0].size(0), m_k->desc.irreps_out.dim()});
    m_k->k.compute(ops_detail::mat<T>(in[1]), labels(), ops_detail::mat<T>(in[0]), ops_detail::mat<T>(y));
    return y;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    auto gx = torch::zeros_like(in[0]), gW = torch::zeros_like(in[1]);
    const auto W = ops_detail::mat<T>(in[1]), x = ops_detail::mat<T>(in[0]), gv = ops_detail::mat<T>(g);
    m_k->k.reverse(W, labels(), x, gv, ops_detail::mat<T>(gx));
    m_k->k.reverse_weights(W, labels(), x, gv, ops_detail::mat<T>(gW));
    return {gx, gW};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    auto x = ops_detail::pack<T>(in[0], tangent[0]), W = ops_detail::pack<T>(in[1], tangent[1]);
    auto go = ops_detail::pack<T>(g, torch::Tensor());
    const auto n = in[0].size(0), din = in[0].size(1), dout = g.size(1);
    const auto xv = ops_detail::dmat<T>(x, n, din), Wv = ops_detail::dmat<T>(W, in[1].size(0), in[1].size(1));
    const auto gv = ops_detail::dmat<T>(go, n, dout);
    std::vector<Dual<T>> y(go.size()), gx(x.size()), gW(W.size());
    m_k->kd.compute(Wv, labels(), xv, ops_detail::dmat<T>(y, n, dout));
    m_k->kd.reverse(Wv, labels(), xv, gv, ops_detail::dmat<T>(gx, n, din));
    m_k->kd.reverse_weights(Wv, labels(), xv, gv, ops_detail::dmat<T>(gW, in[1].size(0), in[1].size(1)));
    return {
        ops_detail::tangents<T>(y, {n, dout}),
        {ops_detail::tangents<T>(gx, {n, din}), ops_detail::tangents<T>(gW, {in[1].size(0), in[1].size(1)})}};
  }

 private:
  ops_detail::Labels labels() const {
    return m_sets.defined() ? ops_detail::Labels(m_sets.data_ptr<int>(), m_sets.size(0))
                            : ops_detail::Labels();
  }
  std::shared_ptr<const LinearKernels<T>> m_k;
  torch::Tensor m_sets;
  std::string m_name;
};

// ---- symmetric contraction ------------------------------------------------------------------

/// MACE's product basis. Weight inputs in mace-torch's layout, W[o][nu-1] = [E, K_nu, C],
/// passed flattened in the order o major, nu = 1..correlation minor. The kernel folds its
/// weights into per-element coefficients, so they are set again from the inputs at each stage
/// (the op is used by one thread at a time; a model serves one batch at a time).
template <class T>
struct SymmetricContractionKernels {
  SymmetricContractionKernels(const kernels::SymmetricContraction& sc, int elements)
      : desc(sc), k(sc), kd(sc), num_elements(elements) {}
  kernels::SymmetricContraction desc;
  kernels::SymmetricContractionKokkos<KernelExec, T> k;
  kernels::SymmetricContractionKokkos<KernelExec, Dual<T>> kd;
  int num_elements;
};

template <class T>
class SymmetricContractionOp final : public KernelOp {
 public:
  SymmetricContractionOp(std::shared_ptr<SymmetricContractionKernels<T>> k, torch::Tensor species,
                         std::string name)
      : m_k(std::move(k)), m_species(std::move(species)), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    m_k->k.set_weights(weights(in), m_k->num_elements);
    torch::Tensor y = ops_detail::zeros<T>({in[0].size(0), m_k->desc.dim_out()});
    m_k->k.compute(labels(), ops_detail::mat<T>(in[0]), ops_detail::mat<T>(y));
    return y;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    m_k->k.set_weights(weights(in), m_k->num_elements);
    auto gx = torch::zeros_like(in[0]);
    const auto x = ops_detail::mat<T>(in[0]), gv = ops_detail::mat<T>(g);
    m_k->k.reverse(labels(), x, gv, ops_detail::mat<T>(gx));
    return with_weights(gx, m_k->k.reverse_weights(labels(), x, gv), in);
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    m_k->kd.set_weights(weights(in), weights(tangent), m_k->num_elements);
    const auto n = in[0].size(0), din = in[0].size(1), dout = g.size(1);
    auto x = ops_detail::pack<T>(in[0], tangent[0]);
    auto go = ops_detail::pack<T>(g, torch::Tensor());
    std::vector<Dual<T>> y(go.size()), gx(x.size());
    const auto xv = ops_detail::dmat<T>(x, n, din), gv = ops_detail::dmat<T>(go, n, dout);
    m_k->kd.compute(labels(), xv, ops_detail::dmat<T>(y, n, dout));
    m_k->kd.reverse(labels(), xv, gv, ops_detail::dmat<T>(gx, n, din));
    const auto gW = m_k->kd.reverse_weights(labels(), xv, gv);
    std::vector<torch::Tensor> h{ops_detail::tangents<T>(gx, {n, din})};
    std::size_t k = 1;
    for (const auto& per_o : gW) {
      for (const auto& w : per_o) {
        h.push_back(ops_detail::tangents<T>(w, in[k].sizes().vec()));
        ++k;
      }
    }
    return {ops_detail::tangents<T>(y, {n, dout}), h};
  }

 private:
  std::vector<std::vector<std::vector<double>>> weights(const std::vector<torch::Tensor>& in) const {
    const int corr = m_k->desc.correlation;
    std::vector<std::vector<std::vector<double>>> W(m_k->desc.irreps_out.size());
    std::size_t k = 1;
    for (auto& per_o : W) {
      for (int nu = 1; nu <= corr; ++nu) {
        per_o.push_back(ops_detail::to_double<T>(in[k++]));
      }
    }
    return W;
  }
  template <class S>
  static std::vector<torch::Tensor> with_weights(torch::Tensor gx,
                                                 const std::vector<std::vector<std::vector<S>>>& gW,
                                                 const std::vector<torch::Tensor>& in) {
    std::vector<torch::Tensor> out{std::move(gx)};
    std::size_t k = 1;
    for (const auto& per_o : gW) {
      for (const auto& w : per_o) {
        out.push_back(ops_detail::from_values<T>(w, in[k].sizes().vec()));
        ++k;
      }
    }
    return out;
  }
  ops_detail::Labels labels() const {
    return ops_detail::Labels(m_species.data_ptr<int>(), m_species.size(0));
  }
  std::shared_ptr<SymmetricContractionKernels<T>> m_k;
  torch::Tensor m_species;
  std::string m_name;
};

// ---- joint embedding of the total charge and spin ------------------------------------------

/// s [G, C]: each structure's joint embedding of its total charge and spin (MACE-OMOL). The
/// values are the batch's data, bound to the op; the inputs are the weights alone, in
/// GraphEmbedding::tensors() order.
template <class T>
class GraphEmbeddingOp final : public KernelOp {
 public:
  GraphEmbeddingOp(const models::mace::GraphEmbedding& g, std::vector<double> charge,
                   std::vector<double> spin)
      : m_g(g), m_charge(std::move(charge)), m_spin(std::move(spin)) {}
  std::string name() const override { return "joint embedding"; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    torch::Tensor s = ops_detail::empty<T>({structures(), m_g.channels});
    const auto w = pointers<const T>(in);
    for (std::int64_t i = 0; i < structures(); ++i) {
      models::mace::compute_graph_embedding<T>(m_g, w, m_charge[i], m_spin[i],
                                               s.data_ptr<T>() + i * m_g.channels);
    }
    return s;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    std::vector<torch::Tensor> grads;
    for (const auto& t : in) {
      grads.push_back(torch::zeros_like(t));
    }
    const auto w = pointers<const T>(in);
    const auto gw = pointers<T>(grads);
    for (std::int64_t i = 0; i < structures(); ++i) {
      models::mace::reverse_graph_embedding<T>(m_g, w, m_charge[i], m_spin[i],
                                               g.data_ptr<T>() + i * m_g.channels, gw);
    }
    return grads;
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    const std::int64_t G = structures(), C = m_g.channels;
    std::vector<std::vector<Dual<T>>> w, gw;
    std::vector<const Dual<T>*> wp;
    std::vector<Dual<T>*> gwp;
    for (std::size_t k = 0; k < in.size(); ++k) {
      w.push_back(ops_detail::pack<T>(in[k], tangent[k]));
      gw.emplace_back(w.back().size(), Dual<T>(0));
    }
    for (std::size_t k = 0; k < in.size(); ++k) {
      wp.push_back(w[k].data());
      gwp.push_back(gw[k].data());
    }
    const auto gd = ops_detail::pack<T>(g, torch::Tensor());
    std::vector<Dual<T>> s(static_cast<std::size_t>(G * C));
    for (std::int64_t i = 0; i < G; ++i) {
      models::mace::compute_graph_embedding<Dual<T>>(m_g, wp, m_charge[i], m_spin[i], s.data() + i * C);
      models::mace::reverse_graph_embedding<Dual<T>>(m_g, wp, m_charge[i], m_spin[i], gd.data() + i * C, gwp);
    }
    std::vector<torch::Tensor> h;
    for (std::size_t k = 0; k < in.size(); ++k) {
      h.push_back(ops_detail::tangents<T>(gw[k], in[k].sizes().vec()));
    }
    return {ops_detail::tangents<T>(s, {G, C}), h};
  }

 private:
  std::int64_t structures() const { return static_cast<std::int64_t>(m_charge.size()); }
  template <class P>
  static std::vector<P*> pointers(const std::vector<torch::Tensor>& t) {
    std::vector<P*> out;
    for (const auto& x : t) {
      out.push_back(x.data_ptr<T>());
    }
    return out;
  }
  models::mace::GraphEmbedding m_g;
  std::vector<double> m_charge, m_spin;
};

}  // namespace fastmlip::trainer
