// SPDX-License-Identifier: MIT
#pragma once
// check_graph: one Kokkos reduction over the nodes and one over the edges, in the graph's own
// memory space, find the first offending index; only that node or edge is copied to the host
// to be described.
#include <Kokkos_Core.hpp>
#include <climits>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "graph/atom_graph.hpp"

namespace fastmlip::graph::impl {

template <class T, class MemorySpace>
struct CheckGraphFunctor {
  struct TagNodes {};
  struct TagEdges {};
  AtomGraph<T, MemorySpace> m_graph;
  int m_num_species = 0;
  double m_floor_sq = 0;  // edges must be longer than this (squared), and non-zero

  KOKKOS_INLINE_FUNCTION bool node_ok(int n) const {
    const int s = m_graph.species(n);
    if (s < 0 || s >= m_num_species) {
      return false;
    }
    return n >= m_graph.n_local || m_graph.center_start(n) <= m_graph.center_start(n + 1);
  }
  KOKKOS_INLINE_FUNCTION bool edge_ok(int e) const {
    const int c = m_graph.center(e), n = m_graph.neighbor(e);
    if (c < 0 || c >= m_graph.n_local || (e > 0 && c < m_graph.center(e - 1))) {
      return false;
    }
    if (e < m_graph.center_start(c) || e >= m_graph.center_start(c + 1)) {
      return false;
    }
    if (n < 0 || n >= m_graph.n_total) {
      return false;
    }
    const double x = m_graph.vectors(e, 0), y = m_graph.vectors(e, 1), z = m_graph.vectors(e, 2);
    const double d2 = x * x + y * y + z * z;
    // !(d2 > 0) also catches NaN; an infinite length is as meaningless.
    return d2 > 0 && d2 >= m_floor_sq && d2 <= 1.7976931348623157e308;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagNodes, int n, int& first) const {
    if (n < first && !node_ok(n)) {
      first = n;
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagEdges, int e, int& first) const {
    if (e < first && !edge_ok(e)) {
      first = e;
    }
  }
};

/// Entry `i` of a rank-1 view, on the host.
template <class V>
typename V::non_const_value_type host_value(const V& v, int i) {
  typename V::non_const_value_type out{};
  Kokkos::deep_copy(out, Kokkos::subview(v, i));
  return out;
}

}  // namespace fastmlip::graph::impl

namespace fastmlip::graph {

template <class T, class MemorySpace>
void check_graph(const AtomGraph<T, MemorySpace>& g, int num_species, const std::string& who,
                 const std::string& species_note, const LengthFloor* floor) {
  using ExecSpace = typename MemorySpace::execution_space;
  using Functor = impl::CheckGraphFunctor<T, MemorySpace>;
  using impl::host_value;
  const std::string fn = who + ": ";
  const int E = g.num_edges();
  if (g.n_local < 0 || g.n_total < g.n_local) {
    throw InputError(fn + "need 0 <= n_local <= n_total, got n_local " + std::to_string(g.n_local) +
                     ", n_total " + std::to_string(g.n_total));
  }
  if (static_cast<int>(g.species.extent(0)) != g.n_total || static_cast<int>(g.neighbor.extent(0)) != E ||
      static_cast<int>(g.vectors.extent(0)) != E ||
      static_cast<int>(g.center_start.extent(0)) != g.n_local + 1) {
    throw InputError(fn + "graph arrays of the wrong size: species " + std::to_string(g.species.extent(0)) +
                     " (need n_total " + std::to_string(g.n_total) + "), center_start " +
                     std::to_string(g.center_start.extent(0)) +
                     " (need n_local + 1 = " + std::to_string(g.n_local + 1) + "), center " +
                     std::to_string(E) + ", neighbor " + std::to_string(g.neighbor.extent(0)) + ", vectors " +
                     std::to_string(g.vectors.extent(0)));
  }
  auto null = [](const auto& v) { return v.extent(0) > 0 && v.data() == nullptr; };
  if (null(g.species) || null(g.center) || null(g.neighbor) || null(g.center_start) || null(g.vectors)) {
    throw InputError(fn + "a graph array is null (species, center, neighbor, center_start or vectors)");
  }
  Functor f{g, num_species, floor != nullptr ? floor->length * floor->length : 0.0};
  int bad = INT_MAX;
  Kokkos::parallel_reduce("fastmlip::graph::check_nodes",
                          Kokkos::RangePolicy<ExecSpace, typename Functor::TagNodes>(0, g.n_total), f,
                          Kokkos::Min<int>(bad));
  if (bad != INT_MAX) {
    const int s = host_value(g.species, bad);
    if (s < 0 || s >= num_species) {
      throw InputError(fn + "node " + std::to_string(bad) + " has species index " + std::to_string(s) + "; " +
                       species_note);
    }
    throw InputError(fn + "center_start must be non-decreasing; it falls after node " + std::to_string(bad));
  }
  bad = INT_MAX;
  Kokkos::parallel_reduce("fastmlip::graph::check_edges",
                          Kokkos::RangePolicy<ExecSpace, typename Functor::TagEdges>(0, E), f,
                          Kokkos::Min<int>(bad));
  if (bad != INT_MAX) {
    const int e = bad, c = host_value(g.center, e), n = host_value(g.neighbor, e);
    const std::string edge = "edge " + std::to_string(e);
    if (c < 0 || c >= g.n_local) {
      throw InputError(fn + edge + " has receiver " + std::to_string(c) + ", not a local node (0.." +
                       std::to_string(g.n_local - 1) + ")");
    }
    const int prev = e > 0 ? host_value(g.center, e - 1) : 0;
    if (e > 0 && c < prev) {
      throw InputError(fn + "edges must be sorted by receiver; " + edge + " has receiver " +
                       std::to_string(c) + " after " + std::to_string(prev));
    }
    const int b0 = host_value(g.center_start, c), b1 = host_value(g.center_start, c + 1);
    if (e < b0 || e >= b1) {
      throw InputError(fn + edge + " (receiver " + std::to_string(c) +
                       ") lies outside center_start's range [" + std::to_string(b0) + ", " +
                       std::to_string(b1) + ") for its receiver; edges must be sorted " +
                       "by receiver and center_start must count each receiver's edges");
    }
    if (n < 0 || n >= g.n_total) {
      throw InputError(fn + edge + " has sender " + std::to_string(n) + ", outside 0.." +
                       std::to_string(g.n_total - 1));
    }
    auto v = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(),
                                                 Kokkos::subview(g.vectors, e, Kokkos::ALL()));
    const double d2 = static_cast<double>(v(0)) * v(0) + static_cast<double>(v(1)) * v(1) +
                      static_cast<double>(v(2)) * v(2);
    const std::string joins =
        fn + edge + " joins nodes " + std::to_string(c) + " and " + std::to_string(n) + " at distance ";
    if (floor != nullptr && d2 > 0 && std::isfinite(d2)) {
      throw InputError(joins + std::to_string(std::sqrt(d2)) + " A, " + floor->what);
    }
    throw InputError(joins + std::to_string(std::sqrt(d2)) +
                     "; coincident atoms, a self-edge without an image shift, or a non-finite position");
  }
  const int first = host_value(g.center_start, 0), last = host_value(g.center_start, g.n_local);
  if (first != 0 || last != E) {
    throw InputError(fn + "center_start runs from " + std::to_string(first) + " to " + std::to_string(last) +
                     "; it must run from 0 to the number of edges, " + std::to_string(E));
  }
}

}  // namespace fastmlip::graph
