// SPDX-License-Identifier: MIT
#pragma once
/// \file The one graph contract between whoever builds a graph (the pair styles, every step,
/// through graph::GraphBuilder; tests and tools from a structure) and the models that evaluate
/// it (MACE, CHGNet).
///
/// Nodes 0..n_local-1 are the atoms whose energies are wanted ("local"); nodes
/// n_local..n_total-1 are ghosts (periodic images or another rank's atoms) that only send.
/// Edge e is directed from its neighbor (sender) j = neighbor(e) to its centre (receiver)
/// i = center(e), which is always local; edges are grouped by centre in node order and
/// center_start is the CSR offset array of that grouping: the edges of centre i are
/// [center_start(i), center_start(i + 1)). The edge vector is
///
///     vectors(e, :) = r_j (+ image shift) - r_i        (Angstrom; one sign, everywhere)
///
/// and a model returns dE/d(vectors), from which F_i += dE/dv, F_j -= dE/dv and the virial
/// W = -sum_e v (x) dE/dv follow (graph::tally_edges). A model that prefers mace-torch's
/// r_i - r_j flips it inside (MACE does), never on the contract.
///
/// The views live in MemorySpace; a builder's graph is where its execution space keeps data,
/// and a model reads it there.
#include <Kokkos_Core.hpp>
#include <string>
#include <vector>

namespace fastmlip::graph {

template <class T, class MemorySpace = Kokkos::HostSpace>
struct AtomGraph {
  using value_type = T;
  using memory_space = MemorySpace;
  using Ints = Kokkos::View<const int*, MemorySpace>;
  using Vectors = Kokkos::View<const T* [3], Kokkos::LayoutRight, MemorySpace>;

  int n_local = 0;
  int n_total = 0;
  Ints species;       ///< [n_total] the model's species index of each node
  Ints center;        ///< [E] receiver i: local, non-decreasing
  Ints neighbor;      ///< [E] sender j: any node
  Ints center_start;  ///< [n_local + 1] CSR offsets of the edges by centre
  Vectors vectors;    ///< [E][3] r_j (+ shift) - r_i

  int num_edges() const { return static_cast<int>(center.extent(0)); }
};

/// A graph over host arrays the caller owns (no copy): what tests and tools that assemble a
/// graph by hand pass to a model. `center_start` has n_local + 1 entries, the others as above.
template <class T>
AtomGraph<T> host_graph(int n_local, int n_total, const int* species, int num_edges, const int* center,
                        const int* neighbor, const int* center_start, const T* vectors) {
  AtomGraph<T> g;
  g.n_local = n_local;
  g.n_total = n_total;
  g.species = typename AtomGraph<T>::Ints(species, n_total < 0 ? 0 : n_total);
  g.center = typename AtomGraph<T>::Ints(center, num_edges < 0 ? 0 : num_edges);
  g.neighbor = typename AtomGraph<T>::Ints(neighbor, num_edges < 0 ? 0 : num_edges);
  g.center_start = typename AtomGraph<T>::Ints(center_start, n_local < 0 ? 0 : n_local + 1);
  g.vectors = typename AtomGraph<T>::Vectors(vectors, num_edges < 0 ? 0 : num_edges);
  return g;
}

/// The CSR offsets [n_local + 1] of edges grouped by centre, counted from `center`. Centres
/// outside 0..n_local-1 are left out of the counts (check_graph then names the edge), so that
/// a wrong graph is reported by the model, not here.
std::vector<int> center_offsets(int n_local, const std::vector<int>& center);

/// Checks a graph against the contract, once per evaluation, where it lives (a Kokkos
/// reduction finds the first bad node and edge; only those are brought to the host to be
/// described). Throws InputError starting with `who` ("MaceModel::compute") that names the node
/// or edge and its nodes: a species outside 0..num_species-1 (`species_note` is appended, e.g.
/// which file's species), a centre not local or out of order, a neighbor out of range, CSR
/// offsets that do not match the centres, a zero-length or non-finite edge vector, and, with a
/// `floor`, an edge shorter than floor->length (the message gives floor->what, e.g. "below the
/// radial tables' start (0.05 A); ...").
struct LengthFloor {
  double length = 0;  ///< A
  std::string what;   ///< appended to the message, after the edge's distance
};
template <class T, class MemorySpace>
void check_graph(const AtomGraph<T, MemorySpace>& g, int num_species, const std::string& who,
                 const std::string& species_note, const LengthFloor* floor = nullptr);

}  // namespace fastmlip::graph
