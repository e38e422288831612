// SPDX-License-Identifier: MIT
#pragma once
/// \file Kokkos functor of the tabulated radial function (radial_table.hpp): one thread per
/// edge; the inner loop over the row's outputs reads the two knots' rows contiguously, so it
/// vectorises on the host and coalesces across a warp's edges on a GPU.
#include <Kokkos_Core.hpp>

#include "kernels/impl/interleaved_sum.hpp"

namespace fastmlip::kernels::impl {

/// The table as kernels read it; also used by the channelwise TP, which evaluates its weights
/// from it inside its own kernels (ChannelwiseTPKokkos' tabulated overloads).
template <class ExecSpace, class T>
struct HermiteTable {
  Kokkos::View<const T*, ExecSpace> data;  // [tables][knots][2][width]: R_k, h R'_k
  int width = 0, knots = 0;
  double r_lo = 0, r_max = 0, inv_h = 0;
  std::size_t stride = 0;  // values per table: 2 knots width
  int tables = 1;
  // Edge e reads table edge_table(e) (one per pair of elements, where R depends on the pair:
  // a distance transform, the non-linear block's species embeddings); empty: every edge reads
  // table 0.
  Kokkos::View<const int*, ExecSpace> edge_table;

  KOKKOS_INLINE_FUNCTION int table_of(int e) const { return edge_table.extent(0) > 0 ? edge_table(e) : 0; }

  /// One r's interval and basis weights: value(j) = sum of four knot entries times them.
  struct Point {
    const T* y0 = nullptr;  // row of R at knot k; m0 = y0 + width, y1 = y0 + 2 width, m1 = y0 + 3 width
    T h00 = 0, h10 = 0, h01 = 0, h11 = 0;  // value
    T g00 = 0, g10 = 0, g01 = 0, g11 = 0;  // derivative, 1/h included
    bool zero = true;                      // at or beyond r_max: R = R' = 0
  };

  /// (Positions are computed in double even for T = float: a float r - r_lo loses the
  /// interval's low bits near r_max.) r below r_lo extrapolates the first cubic; callers refuse
  /// such edges before (RadialTableKokkos::check), this only keeps the reads in bounds.
  KOKKOS_INLINE_FUNCTION Point at(double r, bool derivative, int table = 0) const {
    Point p;
    if (!(r < r_max)) {
      return p;
    }
    const double x = (r - r_lo) * inv_h;
    int k = x > 0 ? static_cast<int>(x) : 0;
    k = k > knots - 2 ? knots - 2 : k;  // rounding at r just below r_max
    const double t = x - k, t2 = t * t, t3 = t2 * t;
    p.zero = false;
    p.y0 = &data(table * stride + 2 * static_cast<std::size_t>(k) * width);
    p.h00 = static_cast<T>(2 * t3 - 3 * t2 + 1);
    p.h10 = static_cast<T>(t3 - 2 * t2 + t);
    p.h01 = static_cast<T>(-2 * t3 + 3 * t2);
    p.h11 = static_cast<T>(t3 - t2);
    if (derivative) {
      p.g00 = static_cast<T>((6 * t2 - 6 * t) * inv_h);
      p.g10 = static_cast<T>((3 * t2 - 4 * t + 1) * inv_h);
      p.g01 = static_cast<T>((-6 * t2 + 6 * t) * inv_h);
      p.g11 = static_cast<T>((3 * t2 - 2 * t) * inv_h);
    }
    return p;
  }

  /// R_j(r) for j = j0 .. j0+n-1 into out.
  KOKKOS_INLINE_FUNCTION void values(const Point& p, int j0, int n, T* out) const {
    if (p.zero) {
      for (int j = 0; j < n; ++j) {
        out[j] = T(0);
      }
      return;
    }
    const T *y0 = p.y0 + j0, *m0 = y0 + width, *y1 = m0 + width, *m1 = y1 + width;
    for (int j = 0; j < n; ++j) {
      out[j] = p.h00 * y0[j] + p.h10 * m0[j] + p.h01 * y1[j] + p.h11 * m1[j];
    }
  }

  /// sum_j g[j] dR_{j0+j}/dr.
  KOKKOS_INLINE_FUNCTION T derivative_dot(const Point& p, int j0, int n, const T* g) const {
    if (p.zero) {
      return T(0);
    }
    const T *y0 = p.y0 + j0, *m0 = y0 + width, *y1 = m0 + width, *m1 = y1 + width;
    // Interleaved: a serial sum over a TP instruction's channels would not vectorise.
    return interleaved_sum<T>(
        n, [&](int j) { return g[j] * (p.g00 * y0[j] + p.g10 * m0[j] + p.g01 * y1[j] + p.g11 * m1[j]); });
  }
};

template <class ExecSpace, class T>
struct RadialTableFunctor {
  struct TagForward {};
  struct TagReverse {};
  struct TagCheck {};
  using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, ExecSpace>;
  using ConstMatrix = Kokkos::View<const T**, Kokkos::LayoutRight, ExecSpace>;

  HermiteTable<ExecSpace, T> m_table;
  Kokkos::View<const T*, ExecSpace> m_r;
  Matrix m_out;
  ConstMatrix m_grad_out;
  Kokkos::View<T*, ExecSpace> m_grad_r;

  KOKKOS_INLINE_FUNCTION void operator()(TagForward, int e) const {
    const auto p = m_table.at(static_cast<double>(m_r(e)), false, m_table.table_of(e));
    m_table.values(p, 0, m_table.width, &m_out(e, 0));
  }

  /// grad_r[e] = sum_j grad_out[e, j] dR_j/dr: the derivative of the very cubic the forward
  /// pass evaluates.
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int e) const {
    const auto p = m_table.at(static_cast<double>(m_r(e)), true, m_table.table_of(e));
    m_grad_r(e) = m_table.derivative_dot(p, 0, m_table.width, &m_grad_out(e, 0));
  }

  /// The first edge below the table (or not a number), or whose table index is out of range:
  /// min over such edge indices.
  KOKKOS_INLINE_FUNCTION void operator()(TagCheck, int e, int& first_bad) const {
    const double r = static_cast<double>(m_r(e));
    const int t = m_table.table_of(e);
    if ((!(r >= m_table.r_lo) || t < 0 || t >= m_table.tables) && e < first_bad) {
      first_bad = e;
    }
  }
};

}  // namespace fastmlip::kernels::impl
