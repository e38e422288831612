// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functor of the tabulated radial function (radial_table.hpp): one thread per
/// edge; the inner loop over the row's outputs reads the two knots' rows contiguously, so it
/// vectorises on the host and coalesces across a warp's edges on a GPU.
#include <Kokkos_Core.hpp>

namespace fastmlip::kernels::impl {

template <class ExecSpace, class T>
struct RadialTableFunctor {
  struct TagForward {};
  struct TagReverse {};
  struct TagCheck {};
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  Kokkos::View<const T*, ExecSpace> m_data;  // [knots][2][width]: R_k, h R'_k
  int m_width = 0, m_knots = 0;
  double m_r_lo = 0, m_r_max = 0, m_inv_h = 0;
  Kokkos::View<const T*, ExecSpace> m_r;
  Matrix m_out;
  ConstMatrix m_grad_out;
  Kokkos::View<T*, ExecSpace> m_grad_r;

  /// Interval k and local coordinate t of r in [r_lo, r_max); false at or beyond r_max.
  /// (Positions are computed in double even for T = float: a float r - r_lo loses the
  /// interval's low bits near r_max.)
  KOKKOS_INLINE_FUNCTION bool locate(double r, int& k, double& t) const {
    if (!(r < m_r_max)) {
      return false;
    }
    const double x = (r - m_r_lo) * m_inv_h;
    k = static_cast<int>(x);
    k = k > m_knots - 2 ? m_knots - 2 : k;  // rounding at r just below r_max
    t = x - k;
    return true;
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagForward, int e) const {
    int k;
    double t;
    if (!locate(static_cast<double>(m_r(e)), k, t)) {
      for (int j = 0; j < m_width; ++j) {
        m_out(e, j) = T(0);
      }
      return;
    }
    const double t2 = t * t, t3 = t2 * t;
    const T h00 = static_cast<T>(2 * t3 - 3 * t2 + 1), h10 = static_cast<T>(t3 - 2 * t2 + t);
    const T h01 = static_cast<T>(-2 * t3 + 3 * t2), h11 = static_cast<T>(t3 - t2);
    const T* y0 = &m_data(2 * static_cast<std::size_t>(k) * m_width);
    const T* m0 = y0 + m_width;
    const T* y1 = m0 + m_width;
    const T* m1 = y1 + m_width;
    T* out = &m_out(e, 0);
    for (int j = 0; j < m_width; ++j) {
      out[j] = h00 * y0[j] + h10 * m0[j] + h01 * y1[j] + h11 * m1[j];
    }
  }

  /// grad_r[e] = sum_j grad_out[e, j] dR_j/dr: the derivative of the very cubic the forward
  /// pass evaluates.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int e) const {
    int k;
    double t;
    if (!locate(static_cast<double>(m_r(e)), k, t)) {
      m_grad_r(e) = T(0);
      return;
    }
    const double t2 = t * t;
    const T g00 = static_cast<T>(6 * t2 - 6 * t), g10 = static_cast<T>(3 * t2 - 4 * t + 1);
    const T g01 = static_cast<T>(-6 * t2 + 6 * t), g11 = static_cast<T>(3 * t2 - 2 * t);
    const T* y0 = &m_data(2 * static_cast<std::size_t>(k) * m_width);
    const T* m0 = y0 + m_width;
    const T* y1 = m0 + m_width;
    const T* m1 = y1 + m_width;
    const T* g = &m_grad_out(e, 0);
    T acc = 0;
    for (int j = 0; j < m_width; ++j) {
      acc += g[j] * (g00 * y0[j] + g10 * m0[j] + g01 * y1[j] + g11 * m1[j]);
    }
    m_grad_r(e) = acc * static_cast<T>(m_inv_h);
  }

  /// The first edge below the table (or not a number): min over such edge indices.
  KOKKOS_INLINE_FUNCTION void operator()(TagCheck, int e, int& first_bad) const {
    const double r = static_cast<double>(m_r(e));
    if (!(r >= m_r_lo) && e < first_bad) {
      first_bad = e;
    }
  }
};

}  // namespace fastmlip::kernels::impl
