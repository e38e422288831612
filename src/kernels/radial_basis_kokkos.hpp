// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos backend of radial_basis.hpp, templated on execution space and float/double.
/// Views are in ExecSpace's memory; `r` > 0 for every edge (the graph code rejects coincident
/// atoms before this point).
#include <Kokkos_Core.hpp>
#include <string>

#include "core/error.hpp"
#include "math/dual.hpp"
#include "kernels/impl/radial_basis_impl.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/radial_basis.hpp"

namespace fastmlip::kernels {

template <class ExecSpace, class T>
class RadialBasisKokkos {
  static_assert(is_kernel_scalar_v<T>, "RadialBasisKokkos: T must be float, double or a Dual of them");

 public:
  using Vector = Kokkos::View<T*, ExecSpace>;
  using ConstVector = Kokkos::View<const T*, ExecSpace>;
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  explicit RadialBasisKokkos(const RadialBasisParams& params) : m_params(params) {
    params.validate();
    set_fixed(params);
    m_f.m_w = impl::upload<ExecSpace>(std::vector<T>(params.frequencies.begin(), params.frequencies.end()),
                                      "fastmlip::radial_basis::frequencies");
    m_f.m_harmonic = params.harmonic();
  }

  /// A Bessel basis with learnable frequencies w (1/A) that live on ExecSpace, as the trainer
  /// holds CHGNet's: the kernel reads `w` in place at every call (no copy to or from the host;
  /// the caller keeps it alive while the kernel is in use). `fixed` gives the cutoff, envelope
  /// and prefactor; its frequencies are not read. The sines are taken one by one, since a
  /// trained w need not be harmonic. With T a Dual, w's tangents are derivatives like any
  /// other input's: compute and reverse carry d/dw.
  RadialBasisKokkos(const RadialBasisParams& fixed, ConstVector w) : m_params(fixed) {
    if (fixed.kind != RadialBasisKind::Bessel || !fixed.apply_cutoff) {
      throw UnsupportedError(
          std::string("RadialBasisKokkos: learnable frequencies are for the Bessel basis with "
                      "its envelope; this one is ") +
          fixed.name() + (fixed.apply_cutoff ? "" : " without its envelope"));
    }
    // Check the fixed parts, and the count, with stand-in values: the frequencies' own values
    // are on ExecSpace and are not read here.
    m_params.frequencies.assign(w.extent(0), 1.0);
    m_params.validate();
    set_fixed(m_params);
    m_f.m_w = w;
    m_f.m_harmonic = false;
  }

  int num_basis() const noexcept { return m_params.num_basis(); }

  /// out(e, n) = R_n(r(e)).
  void compute(ConstVector r, Matrix out) const {
    check_rows("compute", r, out.extent(0), out.extent(1));
    auto f = m_f;
    f.m_r = r;
    f.m_out = out;
    Kokkos::parallel_for("fastmlip::radial_basis::compute",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagCompute>(0, r.extent(0)), f);
  }

  /// grad_r(e) = sum_n grad_out(e, n) dR_n/dr (e).
  void reverse(ConstVector r, ConstMatrix grad_out, Vector grad_r) const {
    check_rows("reverse", r, grad_out.extent(0), grad_out.extent(1));
    check_rows("reverse", r, grad_r.extent(0), num_basis());
    auto f = m_f;
    f.m_r = r;
    f.m_grad_out = grad_out;
    f.m_grad_r = grad_r;
    Kokkos::parallel_for("fastmlip::radial_basis::reverse",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverse>(0, r.extent(0)), f);
  }

  /// out(e, n) = b_n(x(e)) f_p(r(e) / r_max): the basis at a transformed distance x
  /// (distance_transform.hpp), the envelope at the distance r.
  void compute_at(ConstVector x, ConstVector r, Matrix out) const {
    check_rows("compute_at", r, out.extent(0), out.extent(1));
    check_rows("compute_at", x, out.extent(0), out.extent(1));
    auto f = m_f;
    f.m_x = x;
    f.m_r = r;
    f.m_out = out;
    Kokkos::parallel_for("fastmlip::radial_basis::compute_at",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagComputeAt>(0, r.extent(0)), f);
  }

  /// grad_r(e) = sum_n grad_out(e, n) dR_n/dr for compute_at's basis, x = x(r) with slope
  /// dxdr(e): the whole derivative with respect to the distance.
  void reverse_at(ConstVector x, ConstVector dxdr, ConstVector r, ConstMatrix grad_out, Vector grad_r) const {
    check_rows("reverse_at", r, grad_out.extent(0), grad_out.extent(1));
    check_rows("reverse_at", x, grad_out.extent(0), grad_out.extent(1));
    check_rows("reverse_at", dxdr, grad_out.extent(0), grad_out.extent(1));
    check_rows("reverse_at", r, grad_r.extent(0), num_basis());
    auto f = m_f;
    f.m_x = x;
    f.m_dxdr = dxdr;
    f.m_r = r;
    f.m_grad_out = grad_out;
    f.m_grad_r = grad_r;
    Kokkos::parallel_for("fastmlip::radial_basis::reverse_at",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverseAt>(0, r.extent(0)), f);
  }

  /// grad_w(n) = sum_e grad_out(e, n) dR_n/dw_n: for learnable frequencies (CHGNet; a Bessel
  /// basis only).
  void reverse_frequencies(ConstVector r, ConstMatrix grad_out, Vector grad_w) const {
    if (m_params.kind != RadialBasisKind::Bessel || !m_params.apply_cutoff) {
      throw UnsupportedError(std::string("RadialBasisKokkos::reverse_frequencies: the ") + m_params.name() +
                             (m_params.apply_cutoff
                                  ? " basis has no learnable frequencies"
                                  : " basis without its envelope (apply_cutoff false) has none"));
    }
    check_rows("reverse_frequencies", r, grad_out.extent(0), grad_out.extent(1));
    if (static_cast<int>(grad_w.extent(0)) != num_basis()) {
      throw InputError("RadialBasisKokkos::reverse_frequencies: grad_w has " +
                       std::to_string(grad_w.extent(0)) + " entries, expected " +
                       std::to_string(num_basis()));
    }
    auto f = m_f;
    f.m_r = r;
    f.m_grad_out = grad_out;
    f.m_grad_w = grad_w;
    Kokkos::parallel_for(
        "fastmlip::radial_basis::reverse_frequencies",
        Kokkos::TeamPolicy<ExecSpace, typename Functor::TagReverseFrequencies>(num_basis(), Kokkos::AUTO), f);
  }

 private:
  using Functor = impl::RadialBasisFunctor<ExecSpace, T>;
  void set_fixed(const RadialBasisParams& params) {
    m_f.m_num_basis = params.num_basis();
    m_f.m_p = params.envelope_p;
    m_f.m_inv_rmax = static_cast<T>(1.0 / params.r_max);
    m_f.m_c = static_cast<T>(params.c());
    m_f.m_gamma = params.gaussian_coeff;
    m_f.m_inv_rmax_wide = 1.0 / params.r_max;
    m_f.m_kind = params.kind;
    m_f.m_apply_cutoff = params.apply_cutoff;
  }
  void check_rows(const char* what, const ConstVector& r, std::size_t rows, std::size_t cols) const {
    if (rows != r.extent(0) || static_cast<int>(cols) != num_basis()) {
      throw InputError(std::string("RadialBasisKokkos::") + what + ": array is " + std::to_string(rows) +
                       " x " + std::to_string(cols) + ", expected " + std::to_string(r.extent(0)) + " x " +
                       std::to_string(num_basis()) + " (edges x basis functions)");
    }
  }
  RadialBasisParams m_params;  // learnable: the frequencies are stand-ins, for their count
  Functor m_f;
};

template <class ExecSpace, class T>
class FourierKokkos {
  static_assert(is_kernel_scalar_v<T>, "FourierKokkos: T must be float, double or a Dual of them");

 public:
  using Vector = Kokkos::View<T*, ExecSpace>;
  using ConstVector = Kokkos::View<const T*, ExecSpace>;
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  explicit FourierKokkos(const FourierParams& params) : m_params(params) {
    params.validate();
    m_f.m_k = impl::upload<ExecSpace>(std::vector<T>(params.frequencies.begin(), params.frequencies.end()),
                                      "fastmlip::fourier::frequencies");
    m_f.m_order = params.order();
    m_f.m_norm = static_cast<T>(0.56418958354775628695);  // 1/sqrt(pi)
    m_f.m_harmonic = params.harmonic();
  }

  /// Learnable frequencies k that live on ExecSpace, read in place at every call (as
  /// RadialBasisKokkos' learnable constructor): CHGNet's angle basis as the trainer holds it.
  /// The sines and cosines are taken one by one; with T a Dual, k's tangents carry d/dk.
  explicit FourierKokkos(ConstVector k) {
    m_params.frequencies.assign(k.extent(0), 1.0);  // the count, checked; the values stay on ExecSpace
    m_params.validate();
    m_f.m_k = k;
    m_f.m_order = m_params.order();
    m_f.m_norm = static_cast<T>(0.56418958354775628695);
    m_f.m_harmonic = false;
  }

  int width() const noexcept { return m_params.width(); }

  void compute(ConstVector theta, Matrix out) const {
    check("compute", theta, out.extent(0), out.extent(1));
    auto f = m_f;
    f.m_theta = theta;
    f.m_out = out;
    Kokkos::parallel_for("fastmlip::fourier::compute",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagCompute>(0, theta.extent(0)), f);
  }

  void reverse(ConstVector theta, ConstMatrix grad_out, Vector grad_theta) const {
    check("reverse", theta, grad_out.extent(0), grad_out.extent(1));
    check("reverse", theta, grad_theta.extent(0), width());
    auto f = m_f;
    f.m_theta = theta;
    f.m_grad_out = grad_out;
    f.m_grad_theta = grad_theta;
    Kokkos::parallel_for("fastmlip::fourier::reverse",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagReverse>(0, theta.extent(0)), f);
  }

  /// grad_k(j) = sum_a grad_out(a, :) dA/dk_j (a): for learnable frequencies (CHGNet).
  void reverse_frequencies(ConstVector theta, ConstMatrix grad_out, Vector grad_k) const {
    check("reverse_frequencies", theta, grad_out.extent(0), grad_out.extent(1));
    if (static_cast<int>(grad_k.extent(0)) != m_params.order()) {
      throw InputError("FourierKokkos::reverse_frequencies: grad_k has " + std::to_string(grad_k.extent(0)) +
                       " entries, expected " + std::to_string(m_params.order()));
    }
    auto f = m_f;
    f.m_theta = theta;
    f.m_grad_out = grad_out;
    f.m_grad_k = grad_k;
    Kokkos::parallel_for("fastmlip::fourier::reverse_frequencies",
                         Kokkos::TeamPolicy<ExecSpace, typename Functor::TagReverseFrequencies>(m_params.order(), Kokkos::AUTO),
                         f);
  }

 private:
  using Functor = impl::FourierFunctor<ExecSpace, T>;
  void check(const char* what, const ConstVector& theta, std::size_t rows, std::size_t cols) const {
    if (rows != theta.extent(0) || static_cast<int>(cols) != width()) {
      throw InputError(std::string("FourierKokkos::") + what + ": array is " + std::to_string(rows) + " x " +
                       std::to_string(cols) + ", expected " + std::to_string(theta.extent(0)) + " x " +
                       std::to_string(width()) + " (angles x 1+2K)");
    }
  }
  FourierParams m_params;  // learnable: the frequencies are stand-ins, for their count
  Functor m_f;
};

}  // namespace fastmlip::kernels
