// SPDX-License-Identifier: MIT
#pragma once
// graph::tally_edges' functor: one edge per iteration. Forces and per-atom virials land on
// both ends of an edge, so they go through ScatterViews with Kokkos' defaults for the execution
// space (plain on Serial, duplicated on OpenMP, atomic on GPUs); the global virial is the
// launch's reduction.
#include <Kokkos_Core.hpp>
#include <Kokkos_ScatterView.hpp>

#include "graph/atom_graph.hpp"

namespace fastmlip::graph {

/// Six components xx yy zz xy xz yz (LAMMPS' order), summed by Kokkos reductions.
struct Virial6 {
  double v[6];
  KOKKOS_INLINE_FUNCTION Virial6() {
    for (int k = 0; k < 6; ++k) {
      v[k] = 0;
    }
  }
  KOKKOS_INLINE_FUNCTION Virial6& operator+=(const Virial6& o) {
    for (int k = 0; k < 6; ++k) {
      v[k] += o.v[k];
    }
    return *this;
  }
  // Kokkos 3.x joins reduction values through volatile references.
  KOKKOS_INLINE_FUNCTION void operator+=(const volatile Virial6& o) volatile {
    for (int k = 0; k < 6; ++k) {
      v[k] += o.v[k];
    }
  }
};

}  // namespace fastmlip::graph

namespace fastmlip::graph::impl {

template <class ExecSpace, class T, class G, class Forces, class AtomVirials>
struct EdgeTallyFunctor {
  template <bool PER_ATOM>
  struct TagEdges {};
  using value_type = Virial6;
  using Memory = typename ExecSpace::memory_space;
  using ScatterF =
      Kokkos::Experimental::ScatterView<typename Forces::data_type, typename Forces::array_layout, ExecSpace,
                                        Kokkos::Experimental::ScatterSum>;
  using ScatterW =
      Kokkos::Experimental::ScatterView<typename AtomVirials::data_type, typename AtomVirials::array_layout,
                                        ExecSpace, Kokkos::Experimental::ScatterSum>;

  AtomGraph<T, Memory> m_graph;
  Kokkos::View<const G* [3], Kokkos::LayoutRight, Memory> m_gradient;
  ScatterF m_f;
  ScatterW m_w;

  template <bool PER_ATOM>
  KOKKOS_INLINE_FUNCTION void operator()(TagEdges<PER_ATOM> tag, int e) const {
    Virial6 unused;
    tally(tag, e, unused, false);
  }
  template <bool PER_ATOM>
  KOKKOS_INLINE_FUNCTION void operator()(TagEdges<PER_ATOM> tag, int e, Virial6& sum) const {
    tally(tag, e, sum, true);
  }

  // v = x_j - x_i: F_i = -dE/dx_i = +dE/dv, F_j = -dE/dv; the edge's virial -v (x) dE/dv is
  // split evenly between its two atoms for the per-atom virial.
  template <bool PER_ATOM>
  KOKKOS_INLINE_FUNCTION void tally(TagEdges<PER_ATOM>, int e, Virial6& sum, bool global) const {
    const int i = m_graph.center(e), j = m_graph.neighbor(e);
    const double g[3] = {static_cast<double>(m_gradient(e, 0)), static_cast<double>(m_gradient(e, 1)),
                         static_cast<double>(m_gradient(e, 2))};
    auto f = m_f.access();
    for (int k = 0; k < 3; ++k) {
      f(i, k) += g[k];
      f(j, k) -= g[k];
    }
    if (!global && !PER_ATOM) {
      return;
    }
    const double v[3] = {static_cast<double>(m_graph.vectors(e, 0)),
                         static_cast<double>(m_graph.vectors(e, 1)),
                         static_cast<double>(m_graph.vectors(e, 2))};
    const double w[6] = {-v[0] * g[0], -v[1] * g[1], -v[2] * g[2], -v[0] * g[1], -v[0] * g[2], -v[1] * g[2]};
    if (global) {
      for (int k = 0; k < 6; ++k) {
        sum.v[k] += w[k];
      }
    }
    if (PER_ATOM) {
      auto wa = m_w.access();
      for (int k = 0; k < 6; ++k) {
        wa(i, k) += 0.5 * w[k];
        wa(j, k) += 0.5 * w[k];
      }
    }
  }
};

template <class ExecSpace, class Energies, class Out>
struct NodeEnergyFunctor {
  Energies m_node_energy;
  Out m_out;
  KOKKOS_INLINE_FUNCTION void operator()(int i) const { m_out(i) += m_node_energy(i); }
};

}  // namespace fastmlip::graph::impl
