// SPDX-License-Identifier: MIT
#pragma once
/// \file The reverse of building a graph: what a model returns per edge, dE/d(edge vector),
/// becomes forces, the virial and per-atom virials, on ExecSpace, beside the graph it came from
/// (graph_builder.hpp). With v = x_j - x_i for edge j -> i and g = dE/dv:
///
///     F_i += g,   F_j -= g,   W -= v (x) g   (half to each atom for per-atom virials)
///
/// A ghost j's force stays in its ghost row; the caller's reverse communication brings it home
/// (LAMMPS does this with newton on). The same kernels serve the host pair styles (over
/// LAMMPS' host arrays) and the /kk styles (over the KOKKOS package's views).
#include <Kokkos_Core.hpp>
#include <Kokkos_ScatterView.hpp>

#include "graph/atom_graph.hpp"
#include "graph/impl/edge_tally_impl.hpp"

namespace fastmlip::graph {

/// Adds the forces of `gradient` ([E][3], dE/dv in the model's precision G) to `forces`
/// (x(n, k) += for every node n of the graph, k = 0..2) and, when `atom_virials` is not empty,
/// the per-atom virials (6 components per node); returns the global virial when
/// `global_virial`, else zeros. Forces and AtomVirials are rank-2 views on ExecSpace's memory.
template <class ExecSpace, class T, class G, class Forces, class AtomVirials>
Virial6 tally_edges(
    const AtomGraph<T, typename ExecSpace::memory_space>& graph,
    const Kokkos::View<const G* [3], Kokkos::LayoutRight, typename ExecSpace::memory_space>& gradient,
    const Forces& forces, const AtomVirials& atom_virials, bool global_virial) {
  using Functor = impl::EdgeTallyFunctor<ExecSpace, T, G, Forces, AtomVirials>;
  Functor f;
  f.m_graph = graph;
  f.m_gradient = gradient;
  f.m_f = typename Functor::ScatterF(forces);
  const bool per_atom = atom_virials.data() != nullptr;
  if (per_atom) {
    f.m_w = typename Functor::ScatterW(atom_virials);
  }
  Virial6 sum;
  const int E = graph.num_edges();
  if (per_atom) {
    using Policy = Kokkos::RangePolicy<ExecSpace, typename Functor::template TagEdges<true>>;
    if (global_virial) {
      Kokkos::parallel_reduce("fastmlip::graph::tally_edges", Policy(0, E), f, sum);
    } else {
      Kokkos::parallel_for("fastmlip::graph::tally_edges", Policy(0, E), f);
    }
  } else {
    using Policy = Kokkos::RangePolicy<ExecSpace, typename Functor::template TagEdges<false>>;
    if (global_virial) {
      Kokkos::parallel_reduce("fastmlip::graph::tally_edges", Policy(0, E), f, sum);
    } else {
      Kokkos::parallel_for("fastmlip::graph::tally_edges", Policy(0, E), f);
    }
  }
  Forces f_dest = forces;  // contribute() takes its destination by non-const reference
  Kokkos::Experimental::contribute(f_dest, f.m_f);
  if (per_atom) {
    AtomVirials w_dest = atom_virials;
    Kokkos::Experimental::contribute(w_dest, f.m_w);
  }
  return sum;
}

/// out(i) += node_energy(i) for the graph's local nodes (per-atom energies).
template <class ExecSpace, class Energies, class Out>
void tally_node_energies(int n_local, const Energies& node_energy, const Out& out) {
  Kokkos::parallel_for("fastmlip::graph::tally_node_energies", Kokkos::RangePolicy<ExecSpace>(0, n_local),
                       impl::NodeEnergyFunctor<ExecSpace, Energies, Out>{node_energy, out});
}

}  // namespace fastmlip::graph
