// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functors of radial_basis.hpp: one pass per edge (or angle), harmonic Bessel
/// frequencies through the Chebyshev recurrence, envelope powers shared.
#include <Kokkos_Core.hpp>
#include <type_traits>

#include "core/kokkos_compat.hpp"
#include "kernels/impl/polynomial_envelope.hpp"
#include "kernels/radial_basis.hpp"

namespace fastmlip::kernels::impl {

template <class ExecSpace, class T>
struct RadialBasisFunctor {
  struct TagCompute {};
  struct TagReverse {};
  struct TagReverseFrequencies {};
  struct TagComputeAt {};  // the basis at a transformed distance x, the envelope at r
  struct TagReverseAt {};
  using team_member = typename Kokkos::TeamPolicy<ExecSpace, TagReverseFrequencies>::member_type;

  Kokkos::View<const T*, ExecSpace> m_r;
  Kokkos::View<const T*, ExecSpace> m_x, m_dxdr;
  Kokkos::View<const T*, ExecSpace> m_w;
  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> m_out;
  Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace> m_grad_out;
  Kokkos::View<T*, ExecSpace> m_grad_r;
  Kokkos::View<T*, ExecSpace> m_grad_w;
  int m_num_basis = 0;
  int m_p = 5;
  T m_inv_rmax = 0, m_c = 0;
  double m_gamma = 0, m_inv_rmax_wide = 0;  // Gaussian's coefficient and 1 / r_max, unrounded
  RadialBasisKind m_kind = RadialBasisKind::Bessel;
  bool m_harmonic = false;
  bool m_apply_cutoff = true;  // false: no envelope on the basis (RadialBasisParams::apply_cutoff)

  /// The envelope the basis carries: f_p(r / r_max), or 1 (apply_cutoff false).
  template <class S>
  KOKKOS_INLINE_FUNCTION void envelope(S r, S inv_rmax, int p, S& f, S& df) const {
    if (m_apply_cutoff) {
      polynomial_envelope(r, inv_rmax, p, f, df);
    } else {
      f = S(1);
      df = S(0);
    }
  }

  // The Gaussian and Chebyshev bases are evaluated in double when T is float, the products
  // cast once: T_k(x) reaches ~x^N (1e5 at N = 8 near 5 A) and near the cutoff the envelope is a
  // difference of terms ~20 times its value, so float rounding of b_n f alone cost ~1e-4 relative
  // in a Chebyshev model's forces (1e-5 with this).
  using Wide = std::conditional_t<std::is_same_v<T, float>, double, T>;

  // out(e, n) = b_n(x) f(r). Chebyshev walks T_1..T_N by T_(k+1) = 2x T_k - T_(k-1) from
  // T_0 = 1, T_1 = x (torch's own recurrence for |x| > 1; inside [-1, 1] torch takes
  // cos(k acos x) from order 7 on, equal to round-off).
  KOKKOS_INLINE_FUNCTION void compute_polynomial_or_gaussian(int e, Wide x, Wide r) const {
    Wide f, df;
    envelope(r, Wide(m_inv_rmax_wide), m_p, f, df);
    if (m_kind == RadialBasisKind::Gaussian) {
      for (int n = 0; n < m_num_basis; ++n) {
        const Wide d = x - Wide(m_w(n));
        m_out(e, n) = static_cast<T>(kmath::exp(Wide(m_gamma) * d * d) * f);
      }
      return;
    }
    const Wide two_x = 2 * x;
    Wide t_prev = 1, t = x;
    for (int n = 0; n < m_num_basis; ++n) {
      m_out(e, n) = static_cast<T>(t * f);
      const Wide t_next = two_x * t - t_prev;
      t_prev = t;
      t = t_next;
    }
  }

  // sum_n grad_out(e, n) d[b_n(x) f(r)]/dr = sum_n grad_out(e, n) (b_n'(x) dx/dr f + b_n(x) df/dr),
  // with Gaussian b' = 2 gamma (x - mu_n) b and Chebyshev T_k' = k U_(k-1), U the second kind
  // (U_0 = 1, U_1 = 2x, same recurrence).
  KOKKOS_INLINE_FUNCTION T reverse_polynomial_or_gaussian(int e, Wide x, Wide dxdr, Wide r) const {
    Wide f, df;
    envelope(r, Wide(m_inv_rmax_wide), m_p, f, df);
    Wide acc = 0;
    if (m_kind == RadialBasisKind::Gaussian) {
      for (int n = 0; n < m_num_basis; ++n) {
        const Wide d = x - Wide(m_w(n)), b = kmath::exp(Wide(m_gamma) * d * d);
        acc += Wide(m_grad_out(e, n)) * (2 * Wide(m_gamma) * d * b * dxdr * f + b * df);
      }
      return static_cast<T>(acc);
    }
    const Wide two_x = 2 * x;
    Wide t_prev = 1, t = x, u_prev = 0, u = 1;
    for (int n = 0; n < m_num_basis; ++n) {
      acc += Wide(m_grad_out(e, n)) * (Wide(n + 1) * u * dxdr * f + t * df);
      const Wide t_next = two_x * t - t_prev, u_next = two_x * u - u_prev;
      t_prev = t;
      t = t_next;
      u_prev = u;
      u = u_next;
    }
    return static_cast<T>(acc);
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagCompute, int e) const {
    if (m_kind != RadialBasisKind::Bessel) {
      compute_polynomial_or_gaussian(e, m_r(e), m_r(e));
      return;
    }
    const T r = m_r(e);
    T f, df;
    envelope(r, m_inv_rmax, m_p, f, df);
    const T scale = m_c * f / r;
    if (m_harmonic) {
      const T a = m_w(0) * r;
      const T s1 = kmath::sin(a), twoc1 = 2 * kmath::cos(a);
      T s_prev = 0, s = s1;
      for (int n = 0; n < m_num_basis; ++n) {
        m_out(e, n) = scale * s;
        const T s_next = twoc1 * s - s_prev;
        s_prev = s;
        s = s_next;
      }
    } else {
      for (int n = 0; n < m_num_basis; ++n) {
        m_out(e, n) = scale * kmath::sin(m_w(n) * r);
      }
    }
  }

  // dR_n/dr = (c/r) [w_n cos(w_n r) f + sin(w_n r) (df - f/r)]
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int e) const {
    if (m_kind != RadialBasisKind::Bessel) {
      m_grad_r(e) = reverse_polynomial_or_gaussian(e, m_r(e), Wide(1), m_r(e));
      return;
    }
    const T r = m_r(e);
    T f, df;
    envelope(r, m_inv_rmax, m_p, f, df);
    const T sin_coef = df - f / r;
    T acc = 0;
    if (m_harmonic) {
      const T a = m_w(0) * r;
      const T s1 = kmath::sin(a), c1 = kmath::cos(a), twoc1 = 2 * c1;
      T s_prev = 0, s = s1, c_prev = 1, c = c1;
      for (int n = 0; n < m_num_basis; ++n) {
        acc += m_grad_out(e, n) * (m_w(0) * T(n + 1) * c * f + s * sin_coef);
        const T s_next = twoc1 * s - s_prev, c_next = twoc1 * c - c_prev;
        s_prev = s;
        s = s_next;
        c_prev = c;
        c = c_next;
      }
    } else {
      for (int n = 0; n < m_num_basis; ++n) {
        const T wr = m_w(n) * r;
        acc += m_grad_out(e, n) * (m_w(n) * kmath::cos(wr) * f + kmath::sin(wr) * sin_coef);
      }
    }
    m_grad_r(e) = m_c / r * acc;
  }

  // R_n = c sin(w_n x) / x f(r), with x = x(r) (distance_transform.hpp). Direct sines: the
  // transformed models' frequencies are harmonic too, but this path favours the plain form.
  KOKKOS_INLINE_FUNCTION void operator()(TagComputeAt, int e) const {
    if (m_kind != RadialBasisKind::Bessel) {
      compute_polynomial_or_gaussian(e, m_x(e), m_r(e));
      return;
    }
    const T x = m_x(e);
    T f, df;
    envelope(m_r(e), m_inv_rmax, m_p, f, df);
    const T scale = m_c * f / x;
    for (int n = 0; n < m_num_basis; ++n) {
      m_out(e, n) = scale * kmath::sin(m_w(n) * x);
    }
  }

  // dR_n/dr = (c/x) [(w_n cos(w_n x) f - sin(w_n x) f / x) dx/dr + sin(w_n x) df/dr]
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseAt, int e) const {
    if (m_kind != RadialBasisKind::Bessel) {
      m_grad_r(e) = reverse_polynomial_or_gaussian(e, m_x(e), m_dxdr(e), m_r(e));
      return;
    }
    const T x = m_x(e), dxdr = m_dxdr(e);
    T f, df;
    envelope(m_r(e), m_inv_rmax, m_p, f, df);
    T acc = 0;
    for (int n = 0; n < m_num_basis; ++n) {
      const T wx = m_w(n) * x, s = kmath::sin(wx);
      acc += m_grad_out(e, n) * ((m_w(n) * kmath::cos(wx) * f - s * f / x) * dxdr + s * df);
    }
    m_grad_r(e) = m_c / x * acc;
  }

  // One team per frequency; a team reduction over edges keeps the sum's order fixed for a
  // given launch shape, so training is reproducible run to run (no atomics).
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseFrequencies, const team_member& team) const {
    const int n = team.league_rank();
    T sum = 0;
    const auto r = m_r;
    const auto w = m_w;
    const auto g = m_grad_out;
    const T inv_rmax = m_inv_rmax, c = m_c;
    const int p = m_p;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, static_cast<int>(r.extent(0))),
        [=](int e, T& local) {
          T f, df;
          polynomial_envelope(r(e), inv_rmax, p, f, df);
          local += g(e, n) * c * f * kmath::cos(w(n) * r(e));
        },
        sum);
    const auto grad_w = m_grad_w;
    Kokkos::single(Kokkos::PerTeam(team), [&]() { grad_w(n) = sum; });
  }
};

template <class ExecSpace, class T>
struct FourierFunctor {
  struct TagCompute {};
  struct TagReverse {};
  struct TagReverseFrequencies {};
  using team_member = typename Kokkos::TeamPolicy<ExecSpace, TagReverseFrequencies>::member_type;

  Kokkos::View<const T*, ExecSpace> m_theta;
  Kokkos::View<const T*, ExecSpace> m_k;
  Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace> m_out;
  Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace> m_grad_out;
  Kokkos::View<T*, ExecSpace> m_grad_theta;
  Kokkos::View<T*, ExecSpace> m_grad_k;
  int m_order = 0;
  T m_norm = 0;  // 1/sqrt(pi)
  bool m_harmonic = false;

  KOKKOS_INLINE_FUNCTION void operator()(TagCompute, int a) const {
    const T t = m_theta(a);
    const int K = m_order;
    m_out(a, 0) = m_norm * T(0.70710678118654752440);  // 1/sqrt(2)
    if (m_harmonic) {
      const T x = m_k(0) * t;
      const T s1 = kmath::sin(x), c1 = kmath::cos(x), twoc1 = 2 * c1;
      T s_prev = 0, s = s1, c_prev = 1, c = c1;
      for (int k = 0; k < K; ++k) {
        m_out(a, 1 + k) = m_norm * s;
        m_out(a, 1 + K + k) = m_norm * c;
        const T s_next = twoc1 * s - s_prev, c_next = twoc1 * c - c_prev;
        s_prev = s;
        s = s_next;
        c_prev = c;
        c = c_next;
      }
    } else {
      for (int k = 0; k < K; ++k) {
        m_out(a, 1 + k) = m_norm * kmath::sin(m_k(k) * t);
        m_out(a, 1 + K + k) = m_norm * kmath::cos(m_k(k) * t);
      }
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int a) const {
    const T t = m_theta(a);
    const int K = m_order;
    T acc = 0;
    for (int k = 0; k < K; ++k) {
      const T x = m_k(k) * t;
      acc += m_k(k) * (m_grad_out(a, 1 + k) * kmath::cos(x) - m_grad_out(a, 1 + K + k) * kmath::sin(x));
    }
    m_grad_theta(a) = m_norm * acc;
  }

  // dA/dk_j = norm * theta * (cos(k_j theta), -sin(k_j theta)) for the sin and cos columns.
  // One team per frequency, a team reduction over angles: fixed order, no atomics.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseFrequencies, const team_member& team) const {
    const int j = team.league_rank();
    const auto theta = m_theta;
    const auto k = m_k;
    const auto g = m_grad_out;
    const int K = m_order;
    T sum = 0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, static_cast<int>(theta.extent(0))),
        [=](int a, T& local) {
          const T t = theta(a), x = k(j) * t;
          local += t * (g(a, 1 + j) * kmath::cos(x) - g(a, 1 + K + j) * kmath::sin(x));
        },
        sum);
    const auto grad_k = m_grad_k;
    const T norm = m_norm;
    Kokkos::single(Kokkos::PerTeam(team), [&]() { grad_k(j) = norm * sum; });
  }
};

}  // namespace fastmlip::kernels::impl
