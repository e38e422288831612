// SPDX-License-Identifier: MIT
#pragma once
// clang-format off
/// \file The core kernels a MACE forward pass runs, each as a KernelOp (kernel_function.hpp):
/// compute stage, reverse stage (input and weight gradients) and their Dual<T> twins for the
/// double backward. T is float or double, the precision of the tensors; Exec is the Kokkos
/// execution space whose memory holds them (below).
///
///   op              inputs                          output
///   SphericalHarm.  u [E, 3]                        Y [E, (lmax+1)^2]        kernels/spherical_harmonics_kokkos.hpp
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

#include "core/error.hpp"
#include "kernel_function.hpp"
#include "kernels/channelwise_tp_kokkos.hpp"
#include "kernels/distance_transform.hpp"
#include "kernels/edge_index.hpp"
#include "kernels/linear_kokkos.hpp"
#include "kernels/radial_basis_kokkos.hpp"
#include "kernels/radial_mlp_kokkos.hpp"
#include "kernels/spherical_harmonics_kokkos.hpp"
#include "kernels/symmetric_contraction_kokkos.hpp"
#include "math/dual.hpp"
#include "models/device.hpp"
#include "models/mace/graph_embedding.hpp"

namespace fastmlip::trainer {

/// The host execution space: the kernels of a model whose tensors are in CPU memory.
using KernelExec = Kokkos::DefaultHostExecutionSpace;

/// A type standing for an execution space, for a generic lambda's argument.
template <class Exec>
struct ExecTag {
  using type = Exec;
};

/// f(ExecTag<Exec>{}) for the execution space whose memory is `device`'s (models/device.hpp);
/// UnsupportedError naming `who` and device_problem() where this build or process cannot run
/// there.
template <class F>
decltype(auto) with_exec(const torch::Device& device, const std::string& who, F&& f) {
  const std::string problem = device_problem(device);
  if (!problem.empty()) {
    throw UnsupportedError(who + ": " + problem);
  }
#if defined(KOKKOS_ENABLE_CUDA)
  if (device.is_cuda()) {
    return std::forward<F>(f)(ExecTag<Kokkos::Cuda>{});
  }
#endif
  return std::forward<F>(f)(ExecTag<KernelExec>{});
}

template <class T>
constexpr torch::Dtype torch_dtype() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "torch_dtype: T must be float or double");
  return std::is_same_v<T, double> ? torch::kFloat64 : torch::kFloat32;
}

/// Every op below is a template on T and on the Kokkos execution space Exec whose memory holds
/// the tensors: Kokkos' host space for CPU tensors (KernelExec), Kokkos::Cuda for CUDA tensors
/// in a build with a Kokkos-CUDA (models/device.hpp picks one from a torch::Device). The ops
/// read and write the tensors' own storage through unmanaged views, allocate their outputs
/// where the inputs live, and pass dual numbers as tensors of shape [..., 2] (value, tangent),
/// so the same source runs on the host, where CI tests it, and on the GPU. Nothing goes to the
/// host per call: the radial MLP and the symmetric contraction take their weights as flat arrays
/// on the device and scale or fold them there, CHGNet's bases read their frequencies in place
/// (chgnet_ops.hpp). The joint embedding's op (below) works on host copies; on a GPU the models
/// run its arithmetic as LibTorch ops instead, as they do the dense family's.
///
/// Streams: the kernels launch on Exec's default instance. On a GPU that is Kokkos' own stream,
/// created blocking, and LibTorch's ops run on the legacy default stream, which orders itself
/// with every blocking stream: a kernel sees what LibTorch wrote before it, and LibTorch what
/// the kernel wrote.
namespace ops_detail {

template <class S, class Exec = KernelExec>
using Mat = Kokkos::View<S**, Kokkos::LayoutRight, Exec>;
template <class S, class Exec = KernelExec>
using Vec = Kokkos::View<S*, Exec>;
template <class Exec = KernelExec>
using Labels = Kokkos::View<const int*, Exec>;

/// Precision T on the device of `like`.
template <class T>
torch::TensorOptions options(const torch::Tensor& like) {
  return torch::TensorOptions().dtype(torch_dtype<T>()).device(like.device());
}

template <class T>
torch::Tensor zeros(std::initializer_list<std::int64_t> shape, const torch::Tensor& like) {
  return torch::zeros(shape, options<T>(like));
}

/// Uninitialised, for outputs a kernel writes in full.
template <class T>
torch::Tensor empty(std::initializer_list<std::int64_t> shape, const torch::Tensor& like) {
  return torch::empty(shape, options<T>(like));
}

/// A 2-D view of a contiguous tensor's storage (no copy).
template <class T, class Exec = KernelExec>
Mat<T, Exec> mat(const torch::Tensor& t) {
  return Mat<T, Exec>(t.data_ptr<T>(), t.size(0), t.size(1));
}
template <class T, class Exec = KernelExec>
Vec<T, Exec> vec(const torch::Tensor& t) {
  return Vec<T, Exec>(t.data_ptr<T>(), t.size(0));
}

// Dual numbers as tensors: [..., 2], value then tangent, which is Dual<T>'s layout.
static_assert(sizeof(Dual<double>) == 2 * sizeof(double) && sizeof(Dual<float>) == 2 * sizeof(float) &&
                  std::is_standard_layout_v<Dual<double>>,
              "a tensor [..., 2] must be an array of Dual<T>");

/// value + eps * tangent (an undefined tangent is zero), on value's device. On the CPU one loop
/// interleaves them: LibTorch 1.13's stack into a new last dimension (a strided copy) cost about
/// 7% of a float32 training step there.
template <class T>
torch::Tensor duals(const torch::Tensor& value, const torch::Tensor& tangent) {
  if (!value.is_cpu()) {
    return torch::stack({value, tangent.defined() ? tangent : torch::zeros_like(value)}, -1).contiguous();
  }
  std::vector<std::int64_t> shape = value.sizes().vec();
  shape.push_back(2);
  torch::Tensor out = torch::empty(shape, value.options());
  const auto v = value.contiguous();
  const torch::Tensor d = tangent.defined() ? tangent.contiguous() : torch::Tensor();
  const T* pv = v.data_ptr<T>();
  const T* pd = d.defined() ? d.data_ptr<T>() : nullptr;
  T* po = out.data_ptr<T>();
  for (std::int64_t i = 0, n = v.numel(); i < n; ++i) {
    po[2 * i] = pv[i];
    po[2 * i + 1] = pd != nullptr ? pd[i] : T(0);
  }
  return out;
}
/// Zero dual numbers of `shape` on like's device (zeros, as the kernels' accumulating outputs need).
template <class T>
torch::Tensor dual_zeros(std::vector<std::int64_t> shape, const torch::Tensor& like) {
  shape.push_back(2);
  return torch::zeros(shape, options<T>(like));
}
template <class T, class Exec = KernelExec>
Mat<Dual<T>, Exec> dmat(const torch::Tensor& d) {
  return Mat<Dual<T>, Exec>(reinterpret_cast<Dual<T>*>(d.data_ptr<T>()), d.size(0), d.size(1));
}
template <class T, class Exec = KernelExec>
Vec<Dual<T>, Exec> dvec(const torch::Tensor& d) {
  return Vec<Dual<T>, Exec>(reinterpret_cast<Dual<T>*>(d.data_ptr<T>()), d.size(0));
}
/// The tangent parts of a dual tensor [..., 2] (contiguous; on the CPU by one loop, as duals()).
template <class T>
torch::Tensor tangent_of(const torch::Tensor& d) {
  if (!d.is_cpu()) {
    return d.select(-1, 1).contiguous();
  }
  const auto c = d.contiguous();
  torch::Tensor out = torch::empty(c.sizes().slice(0, c.dim() - 1), c.options());
  const T* pd = c.data_ptr<T>();
  T* po = out.data_ptr<T>();
  for (std::int64_t i = 0, n = out.numel(); i < n; ++i) {
    po[i] = pd[2 * i + 1];
  }
  return out;
}

// Host-memory helpers: dual numbers in host arrays (the CHGNet dense family, chgnet_ops.hpp, whose
// kernels take arrays; the weight tangents a kernel returns in host vectors).

/// Dual numbers value + eps * tangent from two CPU tensors of one shape (tangent may be undefined: 0).
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

/// The tangent parts of dual numbers as a CPU tensor of `shape`.
template <class T, class D>
torch::Tensor tangents(const std::vector<D>& x, std::vector<std::int64_t> shape) {
  torch::Tensor out = torch::empty(shape, torch::TensorOptions().dtype(torch_dtype<T>()));
  T* p = out.data_ptr<T>();
  for (std::size_t i = 0; i < x.size(); ++i) {
    p[i] = static_cast<T>(x[i].d);
  }
  return out;
}

/// The tangents of host duals as a tensor of `shape` on like's device.
template <class T, class D>
torch::Tensor tangents_to(const std::vector<D>& x, std::vector<std::int64_t> shape,
                          const torch::Tensor& like) {
  return tangents<T>(x, std::move(shape)).to(like.device());
}

/// Weight inputs in[first..] as one flat array on their device (the kernels' set_weights
/// layout). For tangents, `like` gives the shapes of those that are undefined (zero).
inline torch::Tensor flat_weights(const std::vector<torch::Tensor>& in, std::size_t first,
                                  const std::vector<torch::Tensor>* like = nullptr) {
  std::vector<torch::Tensor> parts;
  for (std::size_t k = first; k < in.size(); ++k) {
    parts.push_back(in[k].defined() ? in[k].reshape({-1})
                                    : torch::zeros({(*like)[k].numel()}, (*like)[k].options()));
  }
  return torch::cat(parts).contiguous();
}

/// {grad_in, then a flat weight gradient cut into the shapes of the weight inputs in[1..]}.
inline std::vector<torch::Tensor> split_weights(torch::Tensor grad_in, const torch::Tensor& flat,
                                                const std::vector<torch::Tensor>& in) {
  std::vector<torch::Tensor> out{std::move(grad_in)};
  std::int64_t at = 0;
  for (std::size_t k = 1; k < in.size(); ++k) {
    out.push_back(flat.narrow(0, at, in[k].numel()).view(in[k].sizes()));
    at += in[k].numel();
  }
  return out;
}

}  // namespace ops_detail

// ---- spherical harmonics ------------------------------------------------------------------

/// Y = SH(u): e3nn's o3.SphericalHarmonics(lmax, normalize=True, "component").
template <class T, class Exec = KernelExec>
class SphericalHarmonicsOp final : public KernelOp {
 public:
  explicit SphericalHarmonicsOp(int lmax) : m_k(lmax), m_kd(lmax) {}
  std::string name() const override { return "spherical harmonics"; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    torch::Tensor Y = ops_detail::empty<T>({in[0].size(0), m_k.dim()}, in[0]);
    m_k.compute(vectors<T>(in[0]), ops_detail::mat<T, Exec>(Y));
    return Y;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    torch::Tensor gu = ops_detail::empty<T>({in[0].size(0), 3}, in[0]);
    m_k.reverse(vectors<T>(in[0]), ops_detail::mat<T, Exec>(g), grad_vectors<T>(gu));
    return {gu};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    const auto E = in[0].size(0);
    const auto u = ops_detail::duals<T>(in[0], tangent[0]);
    const auto gd = ops_detail::duals<T>(g, torch::Tensor());
    auto Y = ops_detail::dual_zeros<T>({E, m_k.dim()}, g), gu = ops_detail::dual_zeros<T>({E, 3}, g);
    m_kd.compute(dual_vectors(u), ops_detail::dmat<T, Exec>(Y));
    m_kd.reverse(dual_vectors(u), ops_detail::dmat<T, Exec>(gd), dual_grad_vectors(gu));
    return {ops_detail::tangent_of<T>(Y), {ops_detail::tangent_of<T>(gu)}};
  }

 private:
  using K = kernels::SphericalHarmonicsKokkos<Exec, T>;
  using KD = kernels::SphericalHarmonicsKokkos<Exec, Dual<T>>;
  template <class S>
  static typename K::Vectors vectors(const torch::Tensor& u) {
    return typename K::Vectors(u.data_ptr<S>(), u.size(0));
  }
  template <class S>
  static typename K::GradVectors grad_vectors(const torch::Tensor& g) {
    return typename K::GradVectors(g.data_ptr<S>(), g.size(0));
  }
  static typename KD::Vectors dual_vectors(const torch::Tensor& d) {
    return typename KD::Vectors(reinterpret_cast<const Dual<T>*>(d.data_ptr<T>()), d.size(0));
  }
  static typename KD::GradVectors dual_grad_vectors(const torch::Tensor& d) {
    return typename KD::GradVectors(reinterpret_cast<Dual<T>*>(d.data_ptr<T>()), d.size(0));
  }
  K m_k;
  KD m_kd;
};

// ---- radial basis ---------------------------------------------------------------------------

/// B = b(r) x polynomial envelope (mace-torch's radial_embedding; b Bessel, Gaussian or
/// Chebyshev). The basis constants are fixed (mace-torch's default, trainable=False): only r is
/// an input.
template <class T, class Exec = KernelExec>
class RadialBasisOp final : public KernelOp {
 public:
  explicit RadialBasisOp(const kernels::RadialBasisParams& p) : m_k(p), m_kd(p), m_n(p.num_basis()) {}
  std::string name() const override { return "radial basis"; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    torch::Tensor B = ops_detail::zeros<T>({in[0].size(0), m_n}, in[0]);
    m_k.compute(ops_detail::vec<T, Exec>(in[0]), ops_detail::mat<T, Exec>(B));
    return B;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    torch::Tensor gr = ops_detail::zeros<T>({in[0].size(0)}, in[0]);
    m_k.reverse(ops_detail::vec<T, Exec>(in[0]), ops_detail::mat<T, Exec>(g), ops_detail::vec<T, Exec>(gr));
    return {gr};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    const auto E = in[0].size(0);
    const auto r = ops_detail::duals<T>(in[0], tangent[0]);
    const auto gd = ops_detail::duals<T>(g, torch::Tensor());
    auto B = ops_detail::dual_zeros<T>({E, m_n}, g), gr = ops_detail::dual_zeros<T>({E}, g);
    const auto rv = ops_detail::dvec<T, Exec>(r);
    m_kd.compute(rv, ops_detail::dmat<T, Exec>(B));
    m_kd.reverse(rv, ops_detail::dmat<T, Exec>(gd), ops_detail::dvec<T, Exec>(gr));
    return {ops_detail::tangent_of<T>(B), {ops_detail::tangent_of<T>(gr)}};
  }

 private:
  kernels::RadialBasisKokkos<Exec, T> m_k;
  kernels::RadialBasisKokkos<Exec, Dual<T>> m_kd;
  std::int64_t m_n;
};

namespace ops_detail {

/// x(r) and dx/dr of mace-torch's distance transform, one edge per iteration, on Exec.
template <class S, class Exec>
struct DistanceTransformFunctor {
  kernels::DistanceTransformConstants c;
  Kokkos::View<const S*, Exec> r, rsum;
  Kokkos::View<S*, Exec> x, dxdr;
  KOKKOS_INLINE_FUNCTION void operator()(int e) const {
    kernels::impl::distance_transform(c, r(e), rsum(e), x(e), dxdr(e));
  }
};

template <class S, class Exec>
void distance_transform(const kernels::DistanceTransformConstants& c, Kokkos::View<const S*, Exec> r,
                        Kokkos::View<const S*, Exec> rsum, Kokkos::View<S*, Exec> x,
                        Kokkos::View<S*, Exec> dxdr) {
  Kokkos::parallel_for("fastmlip::trainer::distance_transform", Kokkos::RangePolicy<Exec>(0, r.extent(0)),
                       DistanceTransformFunctor<S, Exec>{c, r, rsum, x, dxdr});
}

}  // namespace ops_detail

/// B = b(x(r)) x polynomial envelope(r), x the distance transform (Agnesi or Soft) of r for the
/// edge's two elements (mace-torch's radial_embedding with a distance_transform;
/// kernels/distance_transform.hpp). Inputs r [E] and rsum [E], the sum of the edge's two
/// covalent radii: a constant of the species (its gradient is zero). The transform's constants
/// are fixed, as mace-torch's buffers are.
template <class T, class Exec = KernelExec>
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
    torch::Tensor x = ops_detail::zeros<T>({E}, in[0]), s = ops_detail::zeros<T>({E}, in[0]);
    transform(in, x, s);
    torch::Tensor B = ops_detail::zeros<T>({E, m_n}, in[0]);
    m_k.compute_at(ops_detail::vec<T, Exec>(x), ops_detail::vec<T, Exec>(in[0]), ops_detail::mat<T, Exec>(B));
    return B;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    const auto E = in[0].size(0);
    torch::Tensor x = ops_detail::zeros<T>({E}, in[0]), s = ops_detail::zeros<T>({E}, in[0]);
    transform(in, x, s);
    torch::Tensor gr = ops_detail::zeros<T>({E}, in[0]);
    m_k.reverse_at(ops_detail::vec<T, Exec>(x), ops_detail::vec<T, Exec>(s), ops_detail::vec<T, Exec>(in[0]),
                   ops_detail::mat<T, Exec>(g), ops_detail::vec<T, Exec>(gr));
    return {gr, ops_detail::zeros<T>({E}, in[0])};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    const auto E = in[0].size(0);
    const auto r = ops_detail::duals<T>(in[0], tangent[0]);
    const auto rsum = ops_detail::duals<T>(in[1], torch::Tensor());
    const auto gd = ops_detail::duals<T>(g, torch::Tensor());
    auto x = ops_detail::dual_zeros<T>({E}, g), s = ops_detail::dual_zeros<T>({E}, g);
    const auto rv = ops_detail::dvec<T, Exec>(r), xv = ops_detail::dvec<T, Exec>(x),
               sv = ops_detail::dvec<T, Exec>(s);
    ops_detail::distance_transform<Dual<T>, Exec>(m_t, rv, ops_detail::dvec<T, Exec>(rsum), xv, sv);
    auto B = ops_detail::dual_zeros<T>({E, m_n}, g), gr = ops_detail::dual_zeros<T>({E}, g);
    m_kd.compute_at(xv, rv, ops_detail::dmat<T, Exec>(B));
    m_kd.reverse_at(xv, sv, rv, ops_detail::dmat<T, Exec>(gd), ops_detail::dvec<T, Exec>(gr));
    return {ops_detail::tangent_of<T>(B), {ops_detail::tangent_of<T>(gr), ops_detail::zeros<T>({E}, g)}};
  }

 private:
  void transform(const std::vector<torch::Tensor>& in, const torch::Tensor& x, const torch::Tensor& s) const {
    ops_detail::distance_transform<T, Exec>(m_t, ops_detail::vec<T, Exec>(in[0]),
                                            ops_detail::vec<T, Exec>(in[1]), ops_detail::vec<T, Exec>(x),
                                            ops_detail::vec<T, Exec>(s));
  }
  kernels::RadialBasisKokkos<Exec, T> m_k;
  kernels::RadialBasisKokkos<Exec, Dual<T>> m_kd;
  std::int64_t m_n;
  kernels::DistanceTransformConstants m_t;
  std::string m_name;
};

// ---- radial MLP -----------------------------------------------------------------------------

/// R = MLP(B) (mace-torch's conv_tp_weights). The kernels are built once per layer; the
/// weights come with each call, as one flat array on the tensors' device that the kernel scales
/// there, and the weight gradient is written there (no copy to the host).
template <class T, class Exec = KernelExec>
struct RadialMLPKernels {
  explicit RadialMLPKernels(const kernels::RadialMLP& mlp) : shape(mlp), k(mlp), kd(mlp) {}
  kernels::RadialMLP shape;
  kernels::RadialMLPKokkos<Exec, T> k;
  kernels::RadialMLPKokkos<Exec, Dual<T>> kd;
};

template <class T, class Exec = KernelExec>
class RadialMLPOp final : public KernelOp {
 public:
  RadialMLPOp(std::shared_ptr<RadialMLPKernels<T, Exec>> k, std::string name)
      : m_k(std::move(k)), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    const auto W = ops_detail::flat_weights(in, 1);
    m_k->k.set_weights(ops_detail::vec<T, Exec>(W));
    torch::Tensor R = ops_detail::empty<T>({in[0].size(0), m_k->shape.width_out()}, in[0]);
    m_k->k.compute(ops_detail::mat<T, Exec>(in[0]), ops_detail::mat<T, Exec>(R));
    return R;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    const auto W = ops_detail::flat_weights(in, 1);
    m_k->k.set_weights(ops_detail::vec<T, Exec>(W));
    torch::Tensor gB = ops_detail::empty<T>({in[0].size(0), m_k->shape.width_in()}, in[0]);
    torch::Tensor gW = ops_detail::empty<T>({W.size(0)}, g);
    m_k->k.reverse_all(ops_detail::mat<T, Exec>(in[0]), ops_detail::mat<T, Exec>(g),
                       ops_detail::mat<T, Exec>(gB), typename kernels::RadialMLPKokkos<Exec, T>::Matrix(),
                       ops_detail::vec<T, Exec>(gW));
    return ops_detail::split_weights(gB, gW, in);
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    const auto Wd =
        ops_detail::duals<T>(ops_detail::flat_weights(in, 1), ops_detail::flat_weights(tangent, 1, &in));
    m_k->kd.set_weights(ops_detail::dvec<T, Exec>(Wd));
    const auto E = in[0].size(0);
    const auto B = ops_detail::duals<T>(in[0], tangent[0]);
    const auto gd = ops_detail::duals<T>(g, torch::Tensor());
    auto R = ops_detail::dual_zeros<T>({E, m_k->shape.width_out()}, g),
         gB = ops_detail::dual_zeros<T>({E, m_k->shape.width_in()}, g);
    auto gW = ops_detail::dual_zeros<T>({Wd.size(0)}, g);
    m_k->kd.reverse_all(ops_detail::dmat<T, Exec>(B), ops_detail::dmat<T, Exec>(gd),
                        ops_detail::dmat<T, Exec>(gB), ops_detail::dmat<T, Exec>(R),
                        ops_detail::dvec<T, Exec>(gW));
    return {ops_detail::tangent_of<T>(R),
            ops_detail::split_weights(ops_detail::tangent_of<T>(gB), ops_detail::tangent_of<T>(gW), in)};
  }

 private:
  std::shared_ptr<RadialMLPKernels<T, Exec>> m_k;
  std::string m_name;
};

// ---- channelwise tensor product -------------------------------------------------------------

/// A[n] = sum over edges e into n of TP(x[sender(e)], Y[e], R[e]) (conv_tp and the scatter-sum).
template <class T, class Exec = KernelExec>
struct ChannelwiseTPKernels {
  explicit ChannelwiseTPKernels(const kernels::ChannelwiseTP& tp) : k(tp), kd(tp) {}
  kernels::ChannelwiseTPKokkos<Exec, T> k;
  kernels::ChannelwiseTPKokkos<Exec, Dual<T>> kd;
};

template <class T, class Exec = KernelExec>
class ChannelwiseTPOp final : public KernelOp {
 public:
  ChannelwiseTPOp(std::shared_ptr<const ChannelwiseTPKernels<T, Exec>> k,
                  std::shared_ptr<const kernels::EdgeIndex<Exec>> graph, std::string name)
      : m_k(std::move(k)), m_graph(std::move(graph)), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    torch::Tensor A = ops_detail::zeros<T>({m_graph->num_nodes, m_k->k.descriptor().dim_out()}, in[0]);
    m_k->k.compute(*m_graph, ops_detail::mat<T, Exec>(in[0]), ops_detail::mat<T, Exec>(in[1]),
                   ops_detail::mat<T, Exec>(in[2]), ops_detail::mat<T, Exec>(A));
    return A;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    auto gx = torch::zeros_like(in[0]), gY = torch::zeros_like(in[1]), gw = torch::zeros_like(in[2]);
    m_k->k.reverse(*m_graph, ops_detail::mat<T, Exec>(in[0]), ops_detail::mat<T, Exec>(in[1]),
                   ops_detail::mat<T, Exec>(in[2]), ops_detail::mat<T, Exec>(g), ops_detail::mat<T, Exec>(gx),
                   ops_detail::mat<T, Exec>(gY), ops_detail::mat<T, Exec>(gw));
    return {gx, gY, gw};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    std::vector<torch::Tensor> d(3), gd(3);
    for (int k = 0; k < 3; ++k) {
      d[k] = ops_detail::duals<T>(in[k], tangent[k]);
      gd[k] = ops_detail::dual_zeros<T>({in[k].size(0), in[k].size(1)}, g);
    }
    const auto go = ops_detail::duals<T>(g, torch::Tensor());
    auto A = ops_detail::dual_zeros<T>({g.size(0), g.size(1)}, g);
    const auto v = [&](int k) { return ops_detail::dmat<T, Exec>(d[k]); };
    m_k->kd.compute(*m_graph, v(0), v(1), v(2), ops_detail::dmat<T, Exec>(A));
    m_k->kd.reverse(*m_graph, v(0), v(1), v(2), ops_detail::dmat<T, Exec>(go),
                    ops_detail::dmat<T, Exec>(gd[0]), ops_detail::dmat<T, Exec>(gd[1]),
                    ops_detail::dmat<T, Exec>(gd[2]));
    return {ops_detail::tangent_of<T>(A),
            {ops_detail::tangent_of<T>(gd[0]), ops_detail::tangent_of<T>(gd[1]),
             ops_detail::tangent_of<T>(gd[2])}};
  }

 private:
  std::shared_ptr<const ChannelwiseTPKernels<T, Exec>> m_k;
  std::shared_ptr<const kernels::EdgeIndex<Exec>> m_graph;
  std::string m_name;
};

// ---- equivariant linear ---------------------------------------------------------------------

/// o3.Linear (one weight set) or the element-indexed skip_tp (a set per element, chosen by
/// `sets`, the nodes' species as int32, on the tensors' device).
template <class T, class Exec = KernelExec>
struct LinearKernels {
  explicit LinearKernels(const kernels::EquivariantLinear& lin) : desc(lin), k(lin), kd(lin) {}
  kernels::EquivariantLinear desc;
  kernels::LinearKokkos<Exec, T> k;
  kernels::LinearKokkos<Exec, Dual<T>> kd;
};

template <class T, class Exec = KernelExec>
class LinearOp final : public KernelOp {
 public:
  LinearOp(std::shared_ptr<const LinearKernels<T, Exec>> k, torch::Tensor sets, std::string name)
      : m_k(std::move(k)), m_sets(std::move(sets)), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    torch::Tensor y = ops_detail::zeros<T>({in[0].size(0), m_k->desc.irreps_out.dim()}, in[0]);
    m_k->k.compute(ops_detail::mat<T, Exec>(in[1]), labels(), ops_detail::mat<T, Exec>(in[0]),
                   ops_detail::mat<T, Exec>(y));
    return y;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    auto gx = torch::zeros_like(in[0]), gW = torch::zeros_like(in[1]);
    const auto W = ops_detail::mat<T, Exec>(in[1]), x = ops_detail::mat<T, Exec>(in[0]);
    const auto gv = ops_detail::mat<T, Exec>(g);
    m_k->k.reverse(W, labels(), x, gv, ops_detail::mat<T, Exec>(gx));
    m_k->k.reverse_weights(W, labels(), x, gv, ops_detail::mat<T, Exec>(gW));
    return {gx, gW};
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    const auto x = ops_detail::duals<T>(in[0], tangent[0]), W = ops_detail::duals<T>(in[1], tangent[1]);
    const auto go = ops_detail::duals<T>(g, torch::Tensor());
    const auto xv = ops_detail::dmat<T, Exec>(x), Wv = ops_detail::dmat<T, Exec>(W);
    const auto gv = ops_detail::dmat<T, Exec>(go);
    auto y = ops_detail::dual_zeros<T>({g.size(0), g.size(1)}, g);
    auto gx = ops_detail::dual_zeros<T>({in[0].size(0), in[0].size(1)}, g);
    auto gW = ops_detail::dual_zeros<T>({in[1].size(0), in[1].size(1)}, g);
    m_k->kd.compute(Wv, labels(), xv, ops_detail::dmat<T, Exec>(y));
    m_k->kd.reverse(Wv, labels(), xv, gv, ops_detail::dmat<T, Exec>(gx));
    m_k->kd.reverse_weights(Wv, labels(), xv, gv, ops_detail::dmat<T, Exec>(gW));
    return {ops_detail::tangent_of<T>(y), {ops_detail::tangent_of<T>(gx), ops_detail::tangent_of<T>(gW)}};
  }

 private:
  ops_detail::Labels<Exec> labels() const {
    return m_sets.defined() ? ops_detail::Labels<Exec>(m_sets.data_ptr<int>(), m_sets.size(0))
                            : ops_detail::Labels<Exec>();
  }
  std::shared_ptr<const LinearKernels<T, Exec>> m_k;
  torch::Tensor m_sets;
  std::string m_name;
};

// ---- symmetric contraction ------------------------------------------------------------------

/// MACE's product basis. Weight inputs in mace-torch's layout, W[o][nu-1] = [E, K_nu, C],
/// passed flattened in the order o major, nu = 1..correlation minor. The kernel folds its
/// weights into per-element coefficients, so they are set again from the inputs at each stage
/// (the op is used by one thread at a time; a model serves one batch at a time). Weights,
/// fold, weight gradient and its unfold all stay on the tensors' device: the weights go to
/// the kernel as one flat array (SymmetricContraction::weight_offset), concatenated there.
template <class T, class Exec = KernelExec>
struct SymmetricContractionKernels {
  SymmetricContractionKernels(const kernels::SymmetricContraction& sc, int elements)
      : desc(sc), k(sc), kd(sc), num_elements(elements) {}
  kernels::SymmetricContraction desc;
  kernels::SymmetricContractionKokkos<Exec, T> k;
  kernels::SymmetricContractionKokkos<Exec, Dual<T>> kd;
  int num_elements;
};

template <class T, class Exec = KernelExec>
class SymmetricContractionOp final : public KernelOp {
 public:
  SymmetricContractionOp(std::shared_ptr<SymmetricContractionKernels<T, Exec>> k, torch::Tensor species,
                         std::string name)
      : m_k(std::move(k)), m_species(std::move(species)), m_name(std::move(name)) {}
  std::string name() const override { return m_name; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in) const override {
    const auto W = ops_detail::flat_weights(in, 1);
    m_k->k.set_weights(ops_detail::vec<T, Exec>(W), m_k->num_elements);
    torch::Tensor y = ops_detail::zeros<T>({in[0].size(0), m_k->desc.dim_out()}, in[0]);
    m_k->k.compute(labels(), ops_detail::mat<T, Exec>(in[0]), ops_detail::mat<T, Exec>(y));
    return y;
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in,
                                     const torch::Tensor& g) const override {
    const auto W = ops_detail::flat_weights(in, 1);
    m_k->k.set_weights(ops_detail::vec<T, Exec>(W), m_k->num_elements);
    auto gx = torch::zeros_like(in[0]);
    const auto x = ops_detail::mat<T, Exec>(in[0]), gv = ops_detail::mat<T, Exec>(g);
    m_k->k.reverse(labels(), x, gv, ops_detail::mat<T, Exec>(gx));
    torch::Tensor gW = ops_detail::empty<T>({W.size(0)}, g);
    m_k->k.reverse_weights(labels(), x, gv, ops_detail::vec<T, Exec>(gW));
    return ops_detail::split_weights(gx, gW, in);
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in, const std::vector<torch::Tensor>& tangent,
      const torch::Tensor& g) const override {
    const auto Wd =
        ops_detail::duals<T>(ops_detail::flat_weights(in, 1), ops_detail::flat_weights(tangent, 1, &in));
    m_k->kd.set_weights(ops_detail::dvec<T, Exec>(Wd), m_k->num_elements);
    const auto x = ops_detail::duals<T>(in[0], tangent[0]);
    const auto go = ops_detail::duals<T>(g, torch::Tensor());
    auto y = ops_detail::dual_zeros<T>({g.size(0), g.size(1)}, g);
    auto gx = ops_detail::dual_zeros<T>({in[0].size(0), in[0].size(1)}, g);
    auto gW = ops_detail::dual_zeros<T>({Wd.size(0)}, g);
    const auto xv = ops_detail::dmat<T, Exec>(x), gv = ops_detail::dmat<T, Exec>(go);
    m_k->kd.compute(labels(), xv, ops_detail::dmat<T, Exec>(y));
    m_k->kd.reverse(labels(), xv, gv, ops_detail::dmat<T, Exec>(gx));
    m_k->kd.reverse_weights(labels(), xv, gv, ops_detail::dvec<T, Exec>(gW));
    return {ops_detail::tangent_of<T>(y),
            ops_detail::split_weights(ops_detail::tangent_of<T>(gx), ops_detail::tangent_of<T>(gW), in)};
  }

 private:
  ops_detail::Labels<Exec> labels() const {
    return ops_detail::Labels<Exec>(m_species.data_ptr<int>(), m_species.size(0));
  }
  std::shared_ptr<SymmetricContractionKernels<T, Exec>> m_k;
  torch::Tensor m_species;
  std::string m_name;
};

// ---- joint embedding of the total charge and spin ------------------------------------------

/// s [G, C]: each structure's joint embedding of its total charge and spin (MACE-OMOL). The
/// values are the batch's data, bound to the op; the inputs are the weights alone, in
/// GraphEmbedding::tensors() order. A few small MLPs per structure: they run on the host, on
/// copies of the weights, and the results go to the weights' device (on a GPU, MaceTorchModel
/// runs LibTorch ops instead: mace.cpp's graph_embedding_ops).
template <class T>
class GraphEmbeddingOp final : public KernelOp {
 public:
  GraphEmbeddingOp(const models::mace::GraphEmbedding& g, std::vector<double> charge,
                   std::vector<double> spin)
      : m_g(g), m_charge(std::move(charge)), m_spin(std::move(spin)) {}
  std::string name() const override { return "joint embedding"; }

  torch::Tensor compute(const std::vector<torch::Tensor>& in_any) const override {
    const auto in = on_host(in_any);
    torch::Tensor s = torch::empty({structures(), m_g.channels}, torch::dtype(torch_dtype<T>()));
    const auto w = pointers<const T>(in);
    for (std::int64_t i = 0; i < structures(); ++i) {
      models::mace::compute_graph_embedding<T>(m_g, w, m_charge[i], m_spin[i],
                                               s.data_ptr<T>() + i * m_g.channels);
    }
    return s.to(in_any[0].device());
  }
  std::vector<torch::Tensor> reverse(const std::vector<torch::Tensor>& in_any,
                                     const torch::Tensor& g_any) const override {
    const auto in = on_host(in_any);
    const auto g = g_any.to(torch::kCPU).contiguous();
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
    for (auto& t : grads) {
      t = t.to(g_any.device());
    }
    return grads;
  }
  std::pair<torch::Tensor, std::vector<torch::Tensor>> reverse_tangent(
      const std::vector<torch::Tensor>& in_any, const std::vector<torch::Tensor>& tangent_any,
      const torch::Tensor& g_any) const override {
    const auto in = on_host(in_any), tangent = on_host(tangent_any);
    const auto g = g_any.to(torch::kCPU).contiguous();
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
      h.push_back(ops_detail::tangents_to<T>(gw[k], in[k].sizes().vec(), g_any));
    }
    return {ops_detail::tangents_to<T>(s, {G, C}, g_any), h};
  }

 private:
  std::int64_t structures() const { return static_cast<std::int64_t>(m_charge.size()); }
  /// Contiguous CPU copies (trainer::on_host); undefined stays undefined.
  static std::vector<torch::Tensor> on_host(const std::vector<torch::Tensor>& t) {
    std::vector<torch::Tensor> out;
    for (const auto& x : t) {
      out.push_back(x.defined() ? trainer::on_host(x).contiguous() : x);
    }
    return out;
  }
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
