// SPDX-License-Identifier: MIT
#pragma once
/// \file The graph a pair style hands its model, built once per step where the atoms live:
/// from a full neighbor list (every pair twice, ghosts included) to graph::AtomGraph, by Kokkos
/// kernels on ExecSpace. The host styles run it on the default host execution space over
/// LAMMPS' host arrays, the /kk styles on their KOKKOS device over the KOKKOS package's views;
/// the core knows neither, only the access patterns below.
///
/// Neighbors is any copyable type with, on ExecSpace,
///     int inum;                      // atoms in the list
///     int atom(int ii) const;        // index of the ii-th listed atom (a local atom)
///     int count(int i) const;        // listed neighbors of atom i
///     int neighbor(int i, int jj) const;  // the jj-th, an index into Positions (special bits
///                                         // already masked off)
/// Positions: x(i, k) for k = 0..2, every local and ghost atom, double. Types: type(i) per
/// atom, an index into the type_species view given to build().
///
/// Edges i -> j are the listed pairs strictly closer than the cutoff; a pair closer than the
/// minimum distance throws ClosePairError (before any edge is written) so that the caller can
/// name the atoms in its own terms (LAMMPS' atom IDs). Memory is grow-only (grow_rows): an MD
/// run allocates only when its graph grows.
#include <Kokkos_Core.hpp>
#include <string>

#include "core/error.hpp"
#include "core/grow_rows.hpp"
#include "graph/atom_graph.hpp"
#include "graph/impl/graph_builder_impl.hpp"

namespace fastmlip::graph {

/// Two atoms (indices into the positions) closer than the builder's minimum distance.
class ClosePairError : public NumericalError {
 public:
  ClosePairError(int i, int j, double rsq)
      : NumericalError("graph::GraphBuilder: atoms " + std::to_string(i) + " and " + std::to_string(j) +
                       " are closer than the minimum distance"),
        atom_i(i),
        atom_j(j),
        distance_sq(rsq) {}
  int atom_i, atom_j;
  double distance_sq;
};

template <class ExecSpace, class T>
class GraphBuilder {
 public:
  using Memory = typename ExecSpace::memory_space;
  using Graph = AtomGraph<T, Memory>;

  /// `n_local` local atoms (the list's atoms are among them) and `n_total` local + ghost atoms;
  /// `type_species[type(i)]` is atom i's species. The views of the returned graph stay valid
  /// until the next build().
  template <class Positions, class Neighbors, class Types>
  Graph build(const Positions& x, const Neighbors& list, const Types& type,
              const Kokkos::View<const int*, Memory>& type_species, int n_local, int n_total, double cutoff,
              double min_distance) {
    using Functor = impl::GraphBuildFunctor<ExecSpace, T, Positions, Neighbors, Types>;
    grow_rows(m_count, n_local, "fastmlip::graph::count");
    grow_rows(m_center_start, n_local + 1, "fastmlip::graph::center_start");
    grow_rows(m_species, n_total, "fastmlip::graph::species");
    if (m_close.data() == nullptr) {
      m_close = Kokkos::View<int[3], Memory>("fastmlip::graph::close_pair");
      m_close_rsq = Kokkos::View<double, Memory>("fastmlip::graph::close_rsq");
    }
    // Atoms outside the list (neigh_modify include) have no edges.
    Kokkos::deep_copy(ExecSpace(), Kokkos::subview(m_count, Kokkos::pair<int, int>(0, n_local)), 0);
    Kokkos::deep_copy(ExecSpace(), m_close, 0);

    Functor f;
    f.m_x = x;
    f.m_list = list;
    f.m_type = type;
    f.m_type_species = type_species;
    f.m_cutsq = cutoff * cutoff;
    f.m_min_rsq = min_distance * min_distance;
    f.m_nlocal = n_local;
    f.m_count = m_count;
    f.m_center_start = m_center_start;
    f.m_species = m_species;
    f.m_close = m_close;
    f.m_close_rsq = m_close_rsq;
    Kokkos::parallel_for("fastmlip::graph::count_edges",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagCount>(0, list.inum), f);
    auto h_close = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m_close);
    if (h_close(0) != 0) {
      double rsq = 0;
      Kokkos::deep_copy(rsq, m_close_rsq);
      throw ClosePairError(h_close(1), h_close(2), rsq);
    }
    Kokkos::parallel_scan("fastmlip::graph::edge_offsets",
                          Kokkos::RangePolicy<ExecSpace, typename Functor::TagOffsets>(0, n_local + 1), f);
    int num_edges = 0;
    Kokkos::deep_copy(num_edges, Kokkos::subview(m_center_start, n_local));
    grow_rows(m_center, num_edges, "fastmlip::graph::center");
    grow_rows(m_neighbor, num_edges, "fastmlip::graph::neighbor");
    grow_rows(m_vectors, num_edges, "fastmlip::graph::vectors");
    f.m_center = m_center;
    f.m_neighbor = m_neighbor;
    f.m_vectors = m_vectors;
    Kokkos::parallel_for("fastmlip::graph::fill_edges",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagFill>(0, list.inum), f);
    Kokkos::parallel_for("fastmlip::graph::species",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagSpecies>(0, n_total), f);
    ExecSpace().fence();

    Graph g;
    g.n_local = n_local;
    g.n_total = n_total;
    const Kokkos::pair<int, int> edges(0, num_edges);
    g.species = Kokkos::subview(m_species, Kokkos::pair<int, int>(0, n_total));
    g.center = Kokkos::subview(m_center, edges);
    g.neighbor = Kokkos::subview(m_neighbor, edges);
    g.center_start = Kokkos::subview(m_center_start, Kokkos::pair<int, int>(0, n_local + 1));
    g.vectors = Kokkos::subview(m_vectors, edges, Kokkos::ALL());
    return g;
  }

  /// Bytes of the builder's buffers.
  double memory_usage() const {
    return static_cast<double>(m_count.span() + m_center_start.span() + m_species.span() + m_center.span() +
                               m_neighbor.span()) *
               sizeof(int) +
           static_cast<double>(m_vectors.span()) * sizeof(T);
  }

 private:
  Kokkos::View<int*, Memory> m_count, m_center_start, m_species, m_center, m_neighbor;
  Kokkos::View<T* [3], Kokkos::LayoutRight, Memory> m_vectors;
  Kokkos::View<int[3], Memory> m_close;
  Kokkos::View<double, Memory> m_close_rsq;
};

}  // namespace fastmlip::graph
