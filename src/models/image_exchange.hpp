// SPDX-License-Identifier: MIT
#pragma once
/// \file The caller's exchange done where the rows are, when every ghost node is a periodic image
/// of a local node: what one MPI rank holding a whole periodic system has (a single-GPU MD run).
/// LAMMPS' communication then only copies each ghost's row from its owner (forward) and adds it
/// back (reverse); done by the model on its own execution space, no row crosses to the host (on a
/// GPU, no PCIe transfer per layer) and no comm buffer is packed. The caller says so by
/// FeatureExchange::ghost_owners().
///
/// Forward: row g (a ghost) = row owner(g). Reverse: row o (a local) += the rows of its ghosts in
/// ghost order, then every ghost row = 0; one thread per value of a local row sums its ghosts in
/// that fixed order, so the result does not depend on the backend (no atomics). CHGNet's slot
/// rows follow the same rule slot by slot: ghost g's slot q is a copy of owner(g)'s slot q.
#include <Kokkos_Core.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/grow_rows.hpp"
#include "graph/graph_mirror.hpp"

namespace fastmlip::models {

namespace impl {

/// The kernels: node rows (TagForward, TagReverse, TagZeroGhosts) and slot rows (TagSlotNode,
/// TagForwardSlots, TagReverseSlots, TagZeroGhostSlots); one thread per value (row, column), the
/// columns of a row adjacent, so that a GPU's loads and stores coalesce.
struct TagForward {};
struct TagReverse {};
struct TagZeroGhosts {};
struct TagSlotNode {};
struct TagForwardSlots {};
struct TagReverseSlots {};
struct TagZeroGhostSlots {};

template <class ExecSpace, class T>
struct ImageFunctor {
  using Memory = typename ExecSpace::memory_space;

  Kokkos::View<T**, Kokkos::LayoutRight, Memory> rows;
  int width = 0, n_local = 0;
  Kokkos::View<const int*, Memory> owner;        // [n_ghost] local owner of ghost n_local + g
  Kokkos::View<const int*, Memory> ghost_start;  // [n_local + 1] CSR of ghosts by owner
  Kokkos::View<const int*, Memory> ghosts;       // [n_ghost] ghost nodes, grouped by owner, ascending
  Kokkos::View<const int*, Memory> slot_start;   // [n_total + 1]
  Kokkos::View<int*, Memory> slot_node;          // [n_slots] node of each slot
  int first_ghost_slot = 0;

  KOKKOS_INLINE_FUNCTION void operator()(TagForward, int g, int k) const {
    rows(n_local + g, k) = rows(owner(g), k);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagReverse, int o, int k) const {
    T sum = rows(o, k);
    for (int q = ghost_start(o); q < ghost_start(o + 1); ++q) {
      sum += rows(ghosts(q), k);
    }
    rows(o, k) = sum;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagZeroGhosts, int g, int k) const { rows(n_local + g, k) = T(0); }

  KOKKOS_INLINE_FUNCTION void operator()(TagSlotNode, int i) const {
    for (int s = slot_start(i); s < slot_start(i + 1); ++s) {
      slot_node(s) = i;
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagForwardSlots, int r, int k) const {
    const int s = first_ghost_slot + r;
    const int g = slot_node(s);
    rows(s, k) = rows(slot_start(owner(g - n_local)) + (s - slot_start(g)), k);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagReverseSlots, int s, int k) const {
    const int o = slot_node(s), q = s - slot_start(o);
    T sum = rows(s, k);
    for (int p = ghost_start(o); p < ghost_start(o + 1); ++p) {
      sum += rows(slot_start(ghosts(p)) + q, k);
    }
    rows(s, k) = sum;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagZeroGhostSlots, int r, int k) const {
    rows(first_ghost_slot + r, k) = T(0);
  }
};

}  // namespace impl

/// The ghosts' owners for one graph, on ExecSpace, and the exchanges over them; buffers kept
/// (grow-only) between calls.
template <class ExecSpace>
class ImageExchange {
 public:
  using Memory = typename ExecSpace::memory_space;

  /// The owner (a local node, 0..n_local-1) of each ghost n_local..n_total-1, in host memory;
  /// nullptr (or no ghosts) turns it off: active() is then false. Throws InputError naming a
  /// ghost whose owner is not local.
  void set(const int* owner, int n_local, int n_total) {
    m_active = owner != nullptr && n_total > n_local;
    m_n_local = n_local;
    m_n_total = n_total;
    m_slots = false;
    if (!m_active) {
      return;
    }
    const int n_ghost = n_total - n_local;
    std::vector<int> start(static_cast<std::size_t>(n_local) + 1, 0), ghosts(n_ghost);
    for (int g = 0; g < n_ghost; ++g) {
      if (owner[g] < 0 || owner[g] >= n_local) {
        throw InputError("ImageExchange: ghost node " + std::to_string(n_local + g) + " has owner " +
                         std::to_string(owner[g]) + ", not one of the " + std::to_string(n_local) +
                         " local nodes");
      }
      ++start[owner[g] + 1];
    }
    for (int i = 0; i < n_local; ++i) {
      start[i + 1] += start[i];
    }
    std::vector<int> fill(start.begin(), start.end() - 1);
    for (int g = 0; g < n_ghost; ++g) {
      ghosts[fill[owner[g]]++] = n_local + g;  // ascending per owner
    }
    m_owner = to_device(m_owner_buf, owner, n_ghost, "fastmlip::images::owner");
    m_ghost_start = to_device(m_start_buf, start.data(), n_local + 1, "fastmlip::images::ghost_start");
    m_ghosts = to_device(m_ghosts_buf, ghosts.data(), n_ghost, "fastmlip::images::ghosts");
  }
  bool active() const { return m_active; }

  /// Ghost rows of `rows` [n_total][width] = their owners' rows.
  template <class Rows>
  void forward(const Rows& rows) const {
    run<impl::TagForward>("fastmlip::images::forward", rows, m_n_total - m_n_local);
  }
  /// Owners' rows += their ghosts' rows (in ghost order); ghost rows = 0.
  template <class Rows>
  void reverse(const Rows& rows) const {
    run<impl::TagReverse>("fastmlip::images::reverse", rows, m_n_local);
    run<impl::TagZeroGhosts>("fastmlip::images::zero_ghosts", rows, m_n_total - m_n_local);
  }

  /// The slot layout (CHGNet, chgnet_model.hpp) the slot exchanges follow: `slot_start`
  /// [n_total + 1] in Memory, a ghost with as many slots as its owner. After set().
  void set_slots(const Kokkos::View<const int*, Memory>& slot_start, int n_slots, int first_ghost_slot) {
    m_slot_start = slot_start;
    m_n_slots = n_slots;
    m_first_ghost_slot = first_ghost_slot;
    m_slots = m_active;
    if (!m_active) {
      return;
    }
    grow_rows(m_slot_node, static_cast<std::size_t>(n_slots), "fastmlip::images::slot_node");
    impl::ImageFunctor<ExecSpace, int> f;
    f.slot_start = slot_start;
    f.slot_node = m_slot_node;
    Kokkos::parallel_for("fastmlip::images::slot_node",
                         Kokkos::RangePolicy<ExecSpace, impl::TagSlotNode>(0, m_n_total), f);
  }
  bool slots_active() const { return m_slots; }

  /// Ghost slot rows of `rows` [n_slots][width] = their owners' slot rows.
  template <class Rows>
  void forward_slots(const Rows& rows) const {
    run<impl::TagForwardSlots>("fastmlip::images::forward_slots", rows, m_n_slots - m_first_ghost_slot);
  }
  /// Owners' slot rows += their ghosts' (in ghost order); ghost slot rows = 0.
  template <class Rows>
  void reverse_slots(const Rows& rows) const {
    run<impl::TagReverseSlots>("fastmlip::images::reverse_slots", rows, m_first_ghost_slot);
    run<impl::TagZeroGhostSlots>("fastmlip::images::zero_ghost_slots", rows, m_n_slots - m_first_ghost_slot);
  }

  /// Bytes of the buffers.
  double memory_usage() const {
    return static_cast<double>(m_owner_buf.span() + m_start_buf.span() + m_ghosts_buf.span() +
                               m_slot_node.span()) *
           sizeof(int);
  }

 private:
  /// The Tag kernel over rows 0..n-1 of its range and every column of `rows`, one thread per
  /// value.
  template <class Tag, class Rows>
  void run(const char* label, const Rows& rows, int n) const {
    using T = typename Rows::non_const_value_type;
    impl::ImageFunctor<ExecSpace, T> f;
    f.rows = rows;
    f.width = static_cast<int>(rows.extent(1));
    f.n_local = m_n_local;
    f.owner = m_owner;
    f.ghost_start = m_ghost_start;
    f.ghosts = m_ghosts;
    f.slot_start = m_slot_start;
    f.slot_node = m_slot_node;
    f.first_ghost_slot = m_first_ghost_slot;
    if (n > 0 && f.width > 0) {
      using Policy =
          Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>,
                                Tag>;
      Kokkos::parallel_for(label, Policy({0, 0}, {n, f.width}), f);
    }
  }
  /// A host int array into `buf` in Memory: graph::GraphMirror's grow-only copy.
  static Kokkos::View<const int*, Memory> to_device(Kokkos::View<int*, Memory>& buf, const int* host, int n,
                                                    const char* label) {
    return graph::GraphMirror<double, Memory>::copy(
        buf, Kokkos::View<const int*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host, n),
        label);
  }

  bool m_active = false, m_slots = false;
  int m_n_local = 0, m_n_total = 0, m_n_slots = 0, m_first_ghost_slot = 0;
  Kokkos::View<int*, Memory> m_owner_buf, m_start_buf, m_ghosts_buf, m_slot_node;
  Kokkos::View<const int*, Memory> m_owner, m_ghost_start, m_ghosts, m_slot_start;
};

}  // namespace fastmlip::models
