// SPDX-License-Identifier: MIT
#pragma once
/// \file A graph moved to another memory space: the same AtomGraph contract, its views in
/// `To`'s memory. The /kk pair styles use it to hand a device-built graph to a host model, the
/// device model's callers (and tests) to hand a host-built graph to a model on the GPU. Where
/// `To` can read the graph's own memory the graph is returned as it is, nothing copied.
#include <Kokkos_Core.hpp>
#include <cstddef>
#include <type_traits>

#include "core/grow_rows.hpp"
#include "graph/atom_graph.hpp"

namespace fastmlip::graph {

/// Copies kept between calls (grow-only, like GraphBuilder's), so an MD step allocates only
/// when the system grows. One mirror serves one graph at a time.
template <class T, class To>
class GraphMirror {
 public:
  using Graph = AtomGraph<T, To>;

  template <class From>
  Graph of(const AtomGraph<T, From>& g) {
    if constexpr (std::is_same_v<From, To>) {
      return g;
    } else {
      Graph m;
      m.n_local = g.n_local;
      m.n_total = g.n_total;
      m.species = copy(m_species, g.species, "fastmlip::graph::mirror_species");
      m.center = copy(m_center, g.center, "fastmlip::graph::mirror_center");
      m.neighbor = copy(m_neighbor, g.neighbor, "fastmlip::graph::mirror_neighbor");
      m.center_start = copy(m_center_start, g.center_start, "fastmlip::graph::mirror_center_start");
      const std::size_t E = g.vectors.extent(0);
      grow_rows(m_vectors, E, "fastmlip::graph::mirror_vectors");
      const auto part =
          Kokkos::subview(m_vectors, Kokkos::pair<std::size_t, std::size_t>(0, E), Kokkos::ALL());
      Kokkos::deep_copy(part, g.vectors);
      m.vectors = part;
      return m;
    }
  }

  /// An int array into `buf` (grown, never shrunk) in To's memory: what of() does with the
  /// graph's own arrays, for the arrays a model adds to the contract (CHGNet's slots).
  template <class Src>
  static Kokkos::View<const int*, To> copy(Kokkos::View<int*, To>& buf, const Src& src, const char* label) {
    const std::size_t n = src.extent(0);
    grow_rows(buf, n, label);
    const auto part = Kokkos::subview(buf, Kokkos::pair<std::size_t, std::size_t>(0, n));
    Kokkos::deep_copy(part, src);
    return part;
  }

  /// Bytes held by the copies.
  double bytes() const {
    return static_cast<double>(m_species.span() + m_center.span() + m_neighbor.span() +
                               m_center_start.span()) *
               sizeof(int) +
           static_cast<double>(m_vectors.span()) * sizeof(T);
  }

 private:
  Kokkos::View<int*, To> m_species, m_center, m_neighbor, m_center_start;
  Kokkos::View<T* [3], Kokkos::LayoutRight, To> m_vectors;
};

}  // namespace fastmlip::graph
