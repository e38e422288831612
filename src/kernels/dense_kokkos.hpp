// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos entry points of the dense layer and LayerNorm (dense.hpp, layer_norm.hpp) on an
/// execution space's views: CHGNet's embeddings, bond weights, convolution outputs and readout.
///
///   DenseKokkos::compute       y (+)= x W^T + b
///   DenseKokkos::reverse       gx (+)= gy W
///   LayerNormKokkos::compute   y <- LN(y), keeping yhat and 1/sigma
///   LayerNormKokkos::reverse   g <- dL/dy from dL/d(LN(y)), in place
///
/// Two paths behind each entry point (DensePath), as for the gated MLP (gated_mlp_kokkos.hpp):
/// `rows`, the host kernels (SIMD, the same bits as the host model), on host spaces; `teams`,
/// the functors of impl/dense_impl.hpp, on devices, and on the host where a test asks for it.
/// Input gradients only: weight gradients stay with the trainer's host kernels.
#include <Kokkos_Core.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "kernels/dense.hpp"
#include "kernels/dense_path.hpp"
#include "kernels/impl/dense_impl.hpp"
#include "kernels/impl/team_scratch.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/layer_norm.hpp"

namespace fastmlip::kernels {

namespace impl {

template <class ExecSpace>
constexpr bool kHostSpace =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible;

/// The path that runs: rows on a device space is an UnsupportedError (the host kernels cannot
/// read device memory).
template <class ExecSpace>
DensePath resolve_path(DensePath path, const char* owner) {
  if (path == DensePath::automatic) {
    return kHostSpace<ExecSpace> ? DensePath::rows : DensePath::teams;
  }
  if (path == DensePath::rows && !kHostSpace<ExecSpace>) {
    throw UnsupportedError(std::string(owner) + ": the 'rows' path runs the host kernel and cannot read " +
                           ExecSpace::name() + " memory; use 'teams'");
  }
  return path;
}

/// y (+)= x W[:, col0 : col0 + x's width]^T (+ b) on the teams path.
template <class ExecSpace, class T>
void launch_dense(const DenseFunctor<ExecSpace, T>& base,
                  const typename DenseFunctor<ExecSpace, T>::ConstMatrix& x, int col0, int in,
                  typename DenseFunctor<ExecSpace, T>::Vector b,
                  const typename DenseFunctor<ExecSpace, T>::Matrix& y, bool accumulate) {
  DenseFunctor<ExecSpace, T> f = base;
  f.x = x, f.y = y, f.b = b, f.col0 = col0, f.in = in, f.accumulate = accumulate;
  using Tag = typename DenseFunctor<ExecSpace, T>::TagForward;
  Kokkos::parallel_for("fastmlip::dense::forward",
                       Kokkos::RangePolicy<ExecSpace, Tag>(0, x.extent(0) * f.out), f);
}
/// gx (+)= gy W[:, col0 : col0 + gx's width] on the teams path.
template <class ExecSpace, class T>
void launch_dense_reverse(const DenseFunctor<ExecSpace, T>& base,
                          const typename DenseFunctor<ExecSpace, T>::ConstMatrix& gy, int col0, int in,
                          const typename DenseFunctor<ExecSpace, T>::Matrix& gx, bool accumulate) {
  DenseFunctor<ExecSpace, T> f = base;
  f.x = gy, f.y = gx, f.col0 = col0, f.in = in, f.accumulate = accumulate;
  using Tag = typename DenseFunctor<ExecSpace, T>::TagReverse;
  Kokkos::parallel_for("fastmlip::dense::reverse", Kokkos::RangePolicy<ExecSpace, Tag>(0, gy.extent(0) * in),
                       f);
}

}  // namespace impl

template <class ExecSpace, class T>
class DenseKokkos {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "DenseKokkos: T is float or double");
  using Functor = impl::DenseFunctor<ExecSpace, T>;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  explicit DenseKokkos(const Dense<T>& dense, DensePath path = DensePath::automatic)
      : m_host(dense), m_path(impl::resolve_path<ExecSpace>(path, "DenseKokkos")) {
    m_f.W = impl::upload_matrix<ExecSpace>(dense.w, dense.out, dense.in, "fastmlip::dense::W");
    if (!dense.b.empty()) {
      m_b = impl::upload<ExecSpace>(dense.b, "fastmlip::dense::b");
    }
    m_f.in = dense.in, m_f.out = dense.out;
  }
  DensePath path() const { return m_path; }
  int in() const { return m_host.in; }
  int out() const { return m_host.out; }

  /// y [rows][out] = x [rows][in] W^T + b, or y += x W^T with `accumulate` (no bias then).
  void compute(const ConstMatrix& x, const Matrix& y, bool accumulate = false) const {
    impl::check_shape("DenseKokkos", "compute", "x", x, x.extent(0), in());
    impl::check_shape("DenseKokkos", "compute", "y", y, x.extent(0), out());
    if (m_path == DensePath::rows) {
      m_host.compute(x.data(), static_cast<int>(x.extent(0)), in(), y.data(), out(), accumulate);
    } else {
      impl::launch_dense(m_f, x, 0, in(), accumulate ? typename Functor::Vector() : m_b, y, accumulate);
    }
  }
  /// gx [rows][in] (+)= gy [rows][out] W.
  void reverse(const ConstMatrix& gy, const Matrix& gx, bool accumulate = false) const {
    impl::check_shape("DenseKokkos", "reverse", "gy", gy, gy.extent(0), out());
    impl::check_shape("DenseKokkos", "reverse", "gx", gx, gy.extent(0), in());
    if (m_path == DensePath::rows) {
      m_host.reverse(gy.data(), static_cast<int>(gy.extent(0)), out(), gx.data(), in(), accumulate);
    } else {
      impl::launch_dense_reverse(m_f, gy, 0, in(), gx, accumulate);
    }
  }

 private:
  Dense<T> m_host;
  DensePath m_path;
  Functor m_f;
  typename Functor::Vector m_b;
};

template <class ExecSpace, class T>
class LayerNormKokkos {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "LayerNormKokkos: T is float or double");
  using Functor = impl::LayerNormFunctor<ExecSpace, T>;

 public:
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;
  using Vector = Kokkos::View<T*, ExecSpace>;

  explicit LayerNormKokkos(const LayerNorm<T>& norm, DensePath path = DensePath::automatic)
      : m_host(norm), m_path(impl::resolve_path<ExecSpace>(path, "LayerNormKokkos")) {
    m_f.dim = norm.dim;
    m_f.gamma = impl::upload<ExecSpace>(norm.gamma, "fastmlip::layer_norm::gamma");
    m_f.beta = impl::upload<ExecSpace>(norm.beta, "fastmlip::layer_norm::beta");
  }
  DensePath path() const { return m_path; }
  int dim() const { return m_host.dim; }

  /// y [rows][dim] <- LN(y); yhat [rows][dim] and inv_sigma [rows] keep what reverse reads.
  void compute(const Matrix& y, const Matrix& yhat, const Vector& inv_sigma) const {
    check("compute", y, yhat, inv_sigma);
    if (m_path == DensePath::rows) {
      m_host.compute_rows(y.data(), yhat.data(), inv_sigma.data(), static_cast<int>(y.extent(0)));
    } else {
      launch<typename Functor::TagForward>("fastmlip::layer_norm::forward", y, yhat, inv_sigma);
    }
  }
  /// g [rows][dim] <- dL/dy from dL/d(LN(y)), in place, with compute's yhat and inv_sigma.
  void reverse(const Matrix& g, const Matrix& yhat, const Vector& inv_sigma) const {
    check("reverse", g, yhat, inv_sigma);
    if (m_path == DensePath::rows) {
      m_host.reverse_rows(g.data(), yhat.data(), inv_sigma.data(), static_cast<int>(g.extent(0)));
    } else {
      launch<typename Functor::TagReverse>("fastmlip::layer_norm::reverse", g, yhat, inv_sigma);
    }
  }

 private:
  void check(const char* fn, const Matrix& y, const Matrix& yhat, const Vector& inv_sigma) const {
    impl::check_shape("LayerNormKokkos", fn, "y", y, y.extent(0), dim());
    impl::check_shape("LayerNormKokkos", fn, "yhat", yhat, y.extent(0), dim());
    if (inv_sigma.extent(0) != y.extent(0)) {
      throw InputError(std::string("LayerNormKokkos::") + fn + ": inv_sigma has " +
                       std::to_string(inv_sigma.extent(0)) + " rows, expected " +
                       std::to_string(y.extent(0)));
    }
  }
  template <class Tag>
  void launch(const char* label, const Matrix& y, const Matrix& yhat, const Vector& inv_sigma) const {
    Functor f = m_f;
    f.y = y, f.yhat = yhat, f.inv = inv_sigma;
    Kokkos::TeamPolicy<ExecSpace, Tag> policy(static_cast<int>(y.extent(0)), Kokkos::AUTO);
    f.scratch_level =
        impl::set_team_scratch(policy, Functor::Scratch::shmem_size(2 * static_cast<std::size_t>(dim())));
    Kokkos::parallel_for(label, policy, f);
  }

  LayerNorm<T> m_host;
  DensePath m_path;
  Functor m_f;
};

}  // namespace fastmlip::kernels
