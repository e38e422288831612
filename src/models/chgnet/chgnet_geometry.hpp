// SPDX-License-Identifier: MIT
#pragma once
/// \file CHGNet's geometry, the bookkeeping half of its Basis stage (chgnet_stages.hpp), on any
/// Kokkos execution space: the same source on the host and, compiled by a Kokkos-CUDA, the GPU.
///
/// From the graph contract (graph/atom_graph.hpp) and the caller's bond slots (ChgnetGraph):
///
///   short edges   the edges with a reverse slot (r < bond cutoff), numbered in edge order:
///                 short index s of edge e = edge_slot(e), e = short_edge(s). Local nodes own
///                 their short edges' slots in edge order, so s is also the edge's own slot.
///   angles        at each local centre c with short slots s0..s1-1, the ordered pairs (a, b),
///                 a != b, a-major, b-minor (chgnet's order); angle_start is their CSR by centre.
///   r, theta      |v_e|, and theta_alpha = acos(0.999999 u_a . u_b) (chgnet's clamp, which
///                 keeps acos' derivative finite at 0 and pi).
///
/// compute_chgnet_geometry builds it and checks the slot layout (a reduction finds the first
/// bad node or edge; only that is described). reverse_chgnet_geometry maps dE/dr and
/// dE/dtheta to dE/d(edge vectors) with one thread per edge gathering its own angles, in the
/// order a sequential loop over the angles would add them: no atomics, and the same bits as that
/// loop on every backend.
#include <Kokkos_Core.hpp>
#include <climits>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/kokkos_compat.hpp"
#include "graph/atom_graph.hpp"
#include "graph/impl/atom_graph_impl.hpp"  // host_value

namespace fastmlip::models::chgnet {

template <class ExecSpace, class T>
struct Geometry {
  using memory_space = typename ExecSpace::memory_space;
  using Ints = Kokkos::View<int*, memory_space>;
  using Reals = Kokkos::View<T*, memory_space>;

  int num_short = 0;               ///< S
  int num_angles = 0;              ///< A
  Ints edge_slot;                  ///< [E] short index, -1 for a long edge
  Ints short_edge;                 ///< [S] its edge
  Ints short_reverse;              ///< [S] the slot of its reverse bond (the caller's reverse_slot)
  Ints angle_start;                ///< [n_local + 1] CSR of the angles by centre
  Ints angle_a, angle_b, angle_c;  ///< [A] the two short indices and the centre
  Reals r;                         ///< [E]
  Reals r_short;                   ///< [S] r of the short edges
  Reals theta;                     ///< [A]
};

namespace impl {

template <class ExecSpace, class T>
struct GeometryFunctor {
  struct TagCheckSlots {};
  struct TagCheckReverse {};
  struct TagShort {};
  struct TagCheckCounts {};
  struct TagIsShort {};
  struct TagAngleOffsets {};
  struct TagAngles {};
  struct TagLengths {};
  struct TagTheta {};
  struct TagReverse {};

  using Mem = typename ExecSpace::memory_space;
  using ConstInts = Kokkos::View<const int*, Mem>;
  using Gradient = Kokkos::View<double* [3], Kokkos::LayoutRight, Mem>;
  using ConstDoubles = Kokkos::View<const double*, Mem>;

  graph::AtomGraph<T, Mem> m_graph;
  ConstInts m_slot_start, m_reverse_slot;
  int m_num_slots = 0;
  Geometry<ExecSpace, T> m_geo;
  ConstDoubles m_grad_r, m_grad_theta;
  Gradient m_out;

  // ---- checks (first bad index by a Min reduction) ----
  KOKKOS_INLINE_FUNCTION void operator()(TagCheckSlots, int i, int& first) const {
    if (i < first && m_slot_start(i + 1) < m_slot_start(i)) {
      first = i;
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagCheckReverse, int e, int& first) const {
    const int rs = m_reverse_slot(e);
    if (e < first && (rs < -1 || rs >= m_num_slots)) {
      first = e;
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagIsShort, int e, int& count) const {
    count += m_reverse_slot(e) >= 0 ? 1 : 0;
  }
  KOKKOS_INLINE_FUNCTION int short_count(int i) const {
    int n = 0;
    for (int e = m_graph.center_start(i); e < m_graph.center_start(i + 1); ++e) {
      (*this)(TagIsShort{}, e, n);
    }
    return n;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagCheckCounts, int i, int& first) const {
    if (i < first && short_count(i) != m_slot_start(i + 1) - m_slot_start(i)) {
      first = i;
    }
  }

  // ---- compute ----
  KOKKOS_INLINE_FUNCTION void operator()(TagShort, int e, int& next, bool final) const {
    const int rs = m_reverse_slot(e);
    if (final) {
      m_geo.edge_slot(e) = rs >= 0 ? next : -1;
      if (rs >= 0) {
        m_geo.short_edge(next) = e;
        m_geo.short_reverse(next) = rs;
      }
    }
    next += rs >= 0 ? 1 : 0;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagAngleOffsets, int i, int& next, bool final) const {
    const int n = i < m_graph.n_local ? m_slot_start(i + 1) - m_slot_start(i) : 0;
    if (final) {
      m_geo.angle_start(i) = next;
    }
    next += n * (n - 1);
  }
  /// Angle q: its centre by bisection of angle_start, then (a, b) from its rank within the centre.
  KOKKOS_INLINE_FUNCTION void operator()(TagAngles, int q) const {
    int lo = 0, hi = m_graph.n_local;  // angle_start(lo) <= q < angle_start(hi)
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (m_geo.angle_start(mid) <= q) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    const int s0 = m_slot_start(lo), n = m_slot_start(lo + 1) - s0, k = q - m_geo.angle_start(lo);
    const int a = k / (n - 1), b0 = k % (n - 1);
    m_geo.angle_a(q) = s0 + a;
    m_geo.angle_b(q) = s0 + b0 + (b0 >= a ? 1 : 0);
    m_geo.angle_c(q) = lo;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagLengths, int e) const {
    const T x = m_graph.vectors(e, 0), y = m_graph.vectors(e, 1), z = m_graph.vectors(e, 2);
    const T r = kmath::sqrt(x * x + y * y + z * z);
    m_geo.r(e) = r;
    const int s = m_geo.edge_slot(e);
    if (s >= 0) {
      m_geo.r_short(s) = r;
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagTheta, int q) const {
    const int ea = m_geo.short_edge(m_geo.angle_a(q)), eb = m_geo.short_edge(m_geo.angle_b(q));
    const auto& v = m_graph.vectors;
    const T cosv =
        (v(ea, 0) * v(eb, 0) + v(ea, 1) * v(eb, 1) + v(ea, 2) * v(eb, 2)) / (m_geo.r(ea) * m_geo.r(eb));
    m_geo.theta(q) = kmath::acos(cosv * static_cast<T>(1 - 1e-6));
  }

  // ---- reverse ----
  /// Angle q's term in dE/dv of its first (`first`) or second edge: with c = u_a . u_b and
  /// c' = 0.999999 c, dtheta/dc' = -1 / sqrt(1 - c'^2) and d(u_a . u_b)/dv_a = (u_b - c u_a) / r_a.
  KOKKOS_INLINE_FUNCTION void add_angle(int q, bool first, double* g) const {
    const int ea = m_geo.short_edge(m_geo.angle_a(q)), eb = m_geo.short_edge(m_geo.angle_b(q));
    const double ra = m_geo.r(ea), rb = m_geo.r(eb);
    double ua[3], ub[3];
    for (int d = 0; d < 3; ++d) {
      ua[d] = m_graph.vectors(ea, d) / ra;
      ub[d] = m_graph.vectors(eb, d) / rb;
    }
    const double clamp = 1 - 1e-6;
    const double cosv = ua[0] * ub[0] + ua[1] * ub[1] + ua[2] * ub[2];
    const double cp = clamp * cosv;
    const double gc = -m_grad_theta(q) * clamp / kmath::sqrt(kmath::fmax(1e-300, 1 - cp * cp));
    for (int d = 0; d < 3; ++d) {
      g[d] += first ? gc * (ub[d] - cosv * ua[d]) / ra : gc * (ua[d] - cosv * ub[d]) / rb;
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int e) const {
    const double r = m_geo.r(e);
    double g[3];
    for (int d = 0; d < 3; ++d) {
      g[d] = m_grad_r(e) * m_graph.vectors(e, d) / r;
    }
    const int s = m_geo.edge_slot(e);
    if (s >= 0) {
      // Slot s's angles at its centre, in angle order: (a, s) for a < s, then (s, b), then
      // (a, s) for a > s.
      const int c = m_graph.center(e), s0 = m_slot_start(c), n = m_slot_start(c + 1) - s0;
      const int q0 = m_geo.angle_start(c), j = s - s0;
      const auto as_second = [&](int i) { return q0 + i * (n - 1) + (j - 1); };  // (i, j), i < j
      for (int i = 0; i < j; ++i) {
        add_angle(as_second(i), false, g);
      }
      for (int k = 0; k < n - 1; ++k) {
        add_angle(q0 + j * (n - 1) + k, true, g);
      }
      for (int i = j + 1; i < n; ++i) {
        add_angle(q0 + i * (n - 1) + j, false, g);  // (i, j), i > j: b-rank j
      }
    }
    for (int d = 0; d < 3; ++d) {
      m_out(e, d) = g[d];
    }
  }
};

}  // namespace impl

/// Builds `geo` for `graph` with the caller's slots: slot_start [n_total + 1], reverse_slot [E]
/// (ChgnetGraph). Throws InputError, prefixed with `who`, for a slot layout that does not match
/// the short edges; the graph itself is check_graph's to check.
template <class ExecSpace, class T>
void compute_chgnet_geometry(const graph::AtomGraph<T, typename ExecSpace::memory_space>& g,
                             Kokkos::View<const int*, typename ExecSpace::memory_space> slot_start,
                             Kokkos::View<const int*, typename ExecSpace::memory_space> reverse_slot,
                             const std::string& who, Geometry<ExecSpace, T>& geo) {
  using F = impl::GeometryFunctor<ExecSpace, T>;
  using graph::impl::host_value;
  const int N = g.n_total, NL = g.n_local, E = g.num_edges();
  const std::string fn = who + ": ";
  if (static_cast<int>(slot_start.extent(0)) != N + 1 || static_cast<int>(reverse_slot.extent(0)) != E) {
    throw InputError(fn + "slot_start needs n_total + 1 = " + std::to_string(N + 1) +
                     " entries and reverse_slot " + std::to_string(E) + " (one per edge); got " +
                     std::to_string(slot_start.extent(0)) + " and " + std::to_string(reverse_slot.extent(0)));
  }
  if (host_value(slot_start, 0) != 0) {
    throw InputError(fn + "slot_start[0] must be 0");
  }
  F f;
  f.m_graph = g;
  f.m_slot_start = slot_start;
  f.m_reverse_slot = reverse_slot;
  f.m_num_slots = host_value(slot_start, N);
  int bad = INT_MAX;
  Kokkos::parallel_reduce("fastmlip::chgnet::check_slots",
                          Kokkos::RangePolicy<ExecSpace, typename F::TagCheckSlots>(0, N), f,
                          Kokkos::Min<int>(bad));
  if (bad != INT_MAX) {
    throw InputError(fn + "slot_start must be non-decreasing; it falls after node " + std::to_string(bad));
  }
  Kokkos::parallel_reduce("fastmlip::chgnet::check_reverse_slots",
                          Kokkos::RangePolicy<ExecSpace, typename F::TagCheckReverse>(0, E), f,
                          Kokkos::Min<int>(bad));
  if (bad != INT_MAX) {
    throw InputError(fn + "edge " + std::to_string(bad) + ": reverse slot " +
                     std::to_string(host_value(reverse_slot, bad)) + " out of range (-1 to " +
                     std::to_string(f.m_num_slots - 1) + ")");
  }
  Kokkos::parallel_reduce("fastmlip::chgnet::check_slot_counts",
                          Kokkos::RangePolicy<ExecSpace, typename F::TagCheckCounts>(0, NL), f,
                          Kokkos::Min<int>(bad));
  if (bad != INT_MAX) {
    int count = 0;
    Kokkos::parallel_reduce("fastmlip::chgnet::count_node_short",
                            Kokkos::RangePolicy<ExecSpace, typename F::TagIsShort>(
                                host_value(g.center_start, bad), host_value(g.center_start, bad + 1)),
                            f, count);
    throw InputError(
        fn + "node " + std::to_string(bad) + " has " + std::to_string(count) + " short edges but " +
        std::to_string(host_value(slot_start, bad + 1) - host_value(slot_start, bad)) + " slots");
  }

  using Ints = typename Geometry<ExecSpace, T>::Ints;
  using Reals = typename Geometry<ExecSpace, T>::Reals;
  const auto alloc = [](const char* label) {
    return Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label));
  };
  geo.edge_slot = Ints(alloc("fastmlip::chgnet::edge_slot"), E);
  int S = 0;
  Kokkos::parallel_reduce("fastmlip::chgnet::count_short",
                          Kokkos::RangePolicy<ExecSpace, typename F::TagIsShort>(0, E), f, S);
  geo.num_short = S;
  geo.short_edge = Ints(alloc("fastmlip::chgnet::short_edge"), S);
  geo.short_reverse = Ints(alloc("fastmlip::chgnet::short_reverse"), S);
  f.m_geo = geo;
  Kokkos::parallel_scan("fastmlip::chgnet::short_edges",
                        Kokkos::RangePolicy<ExecSpace, typename F::TagShort>(0, E), f);

  geo.angle_start = Ints(alloc("fastmlip::chgnet::angle_start"), NL + 1);
  f.m_geo = geo;
  Kokkos::parallel_scan("fastmlip::chgnet::angle_offsets",
                        Kokkos::RangePolicy<ExecSpace, typename F::TagAngleOffsets>(0, NL + 1), f);
  const int A = geo.num_angles = host_value(geo.angle_start, NL);
  geo.angle_a = Ints(alloc("fastmlip::chgnet::angle_a"), A);
  geo.angle_b = Ints(alloc("fastmlip::chgnet::angle_b"), A);
  geo.angle_c = Ints(alloc("fastmlip::chgnet::angle_c"), A);
  geo.r = Reals(alloc("fastmlip::chgnet::r"), E);
  geo.r_short = Reals(alloc("fastmlip::chgnet::r_short"), S);
  geo.theta = Reals(alloc("fastmlip::chgnet::theta"), A);
  f.m_geo = geo;
  Kokkos::parallel_for("fastmlip::chgnet::angles",
                       Kokkos::RangePolicy<ExecSpace, typename F::TagAngles>(0, A), f);
  Kokkos::parallel_for("fastmlip::chgnet::lengths",
                       Kokkos::RangePolicy<ExecSpace, typename F::TagLengths>(0, E), f);
  Kokkos::parallel_for("fastmlip::chgnet::theta", Kokkos::RangePolicy<ExecSpace, typename F::TagTheta>(0, A),
                       f);
}

/// dE/d(edge vectors) [E][3] (overwritten) from dE/dr [E] and dE/dtheta [A], through `geo` as
/// compute_chgnet_geometry built it for the same graph and slots.
template <class ExecSpace, class T>
void reverse_chgnet_geometry(
    const graph::AtomGraph<T, typename ExecSpace::memory_space>& g,
    Kokkos::View<const int*, typename ExecSpace::memory_space> slot_start, const Geometry<ExecSpace, T>& geo,
    Kokkos::View<const double*, typename ExecSpace::memory_space> grad_r,
    Kokkos::View<const double*, typename ExecSpace::memory_space> grad_theta,
    Kokkos::View<double* [3], Kokkos::LayoutRight, typename ExecSpace::memory_space> out) {
  using F = impl::GeometryFunctor<ExecSpace, T>;
  const int E = g.num_edges();
  if (static_cast<int>(grad_r.extent(0)) != E || static_cast<int>(grad_theta.extent(0)) != geo.num_angles ||
      static_cast<int>(out.extent(0)) != E) {
    throw InputError("reverse_chgnet_geometry: grad_r needs " + std::to_string(E) + " entries, grad_theta " +
                     std::to_string(geo.num_angles) + " and out " + std::to_string(E) + " rows; got " +
                     std::to_string(grad_r.extent(0)) + ", " + std::to_string(grad_theta.extent(0)) +
                     " and " + std::to_string(out.extent(0)));
  }
  F f;
  f.m_graph = g;
  f.m_slot_start = slot_start;
  f.m_geo = geo;
  f.m_grad_r = grad_r;
  f.m_grad_theta = grad_theta;
  f.m_out = out;
  Kokkos::parallel_for("fastmlip::chgnet::reverse_geometry",
                       Kokkos::RangePolicy<ExecSpace, typename F::TagReverse>(0, E), f);
}

}  // namespace fastmlip::models::chgnet
