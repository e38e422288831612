// SPDX-License-Identifier: MIT
#pragma once
// The stages of graph::GraphBuilder as one functor with a tag per stage: count each listed
// atom's edges (and spot atoms closer than the minimum distance), scan the counts to CSR
// offsets, fill the edges, map types to species. The fill writes each centre's edges in the
// list's order starting at its own offset, so the result does not depend on the thread count.
#include <Kokkos_Core.hpp>

namespace fastmlip::graph::impl {

template <class ExecSpace, class T, class Positions, class Neighbors, class Types>
struct GraphBuildFunctor {
  struct TagCount {};
  struct TagOffsets {};
  struct TagFill {};
  struct TagSpecies {};
  using Memory = typename ExecSpace::memory_space;
  using value_type = int;  // the exclusive scan's

  Positions m_x;
  Neighbors m_list;
  Types m_type;
  Kokkos::View<const int*, Memory> m_type_species;
  double m_cutsq = 0, m_min_rsq = 0;
  int m_nlocal = 0;

  Kokkos::View<int*, Memory> m_count, m_center_start, m_center, m_neighbor, m_species;
  Kokkos::View<T* [3], Kokkos::LayoutRight, Memory> m_vectors;
  // The first close pair found, by whichever thread gets there first: flag, i, j, rsq.
  Kokkos::View<int[3], Memory> m_close;
  Kokkos::View<double, Memory> m_close_rsq;

  KOKKOS_INLINE_FUNCTION void operator()(TagCount, int ii) const {
    const int i = m_list.atom(ii);
    const double xi = m_x(i, 0), yi = m_x(i, 1), zi = m_x(i, 2);
    const int jnum = m_list.count(i);
    int count = 0;
    for (int jj = 0; jj < jnum; ++jj) {
      const int j = m_list.neighbor(i, jj);
      const double dx = m_x(j, 0) - xi, dy = m_x(j, 1) - yi, dz = m_x(j, 2) - zi;
      const double rsq = dx * dx + dy * dy + dz * dz;
      if (rsq < m_min_rsq && Kokkos::atomic_compare_exchange(&m_close(0), 0, 1) == 0) {
        m_close(1) = i;
        m_close(2) = j;
        m_close_rsq() = rsq;
      }
      count += rsq < m_cutsq ? 1 : 0;
    }
    m_count(i) = count;
  }

  // Exclusive scan over i = 0..nlocal (one past the end), so that m_center_start(nlocal) is the
  // number of edges even when there are no local atoms.
  KOKKOS_INLINE_FUNCTION void operator()(TagOffsets, int i, int& update, bool final) const {
    if (final) {
      m_center_start(i) = update;
    }
    update += i < m_nlocal ? m_count(i) : 0;
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagFill, int ii) const {
    const int i = m_list.atom(ii);
    const double xi = m_x(i, 0), yi = m_x(i, 1), zi = m_x(i, 2);
    const int jnum = m_list.count(i);
    int e = m_center_start(i);
    for (int jj = 0; jj < jnum; ++jj) {
      const int j = m_list.neighbor(i, jj);
      const double dx = m_x(j, 0) - xi, dy = m_x(j, 1) - yi, dz = m_x(j, 2) - zi;
      if (dx * dx + dy * dy + dz * dz >= m_cutsq) {
        continue;
      }
      m_center(e) = i;
      m_neighbor(e) = j;
      m_vectors(e, 0) = static_cast<T>(dx);
      m_vectors(e, 1) = static_cast<T>(dy);
      m_vectors(e, 2) = static_cast<T>(dz);
      ++e;
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagSpecies, int i) const {
    m_species(i) = m_type_species(m_type(i));
  }
};

}  // namespace fastmlip::graph::impl
