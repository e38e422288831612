// SPDX-License-Identifier: MIT
#pragma once
/// \file The bond slots of a CHGNet graph whose ghosts are other ranks' atoms or periodic images
/// (a LAMMPS pair style's graph; chgnet_model.hpp says what slots are): which edges are short,
/// how many slots each node has, and the slot holding the reverse of each short edge. Built on
/// the execution space that holds the graph, so that a model on a GPU gets its slots where its
/// graph is (the /kk styles on a GPU LAMMPS); the host styles run the same kernels on the host.
///
/// Three kernels and two exchanges. (1) Each local node counts its short edges, decided in
/// double from the positions (so that both ends of a bond agree whatever the compute
/// precision); ghosts get their owner's count by a forward node exchange; a scan makes the
/// layout. (2) Each local slot records its far atom's ID and the bond vector; ghost slots get
/// their owner's records by a forward slot exchange. (3) The reverse of short edge i -> j is
/// the slot of node j whose record has i's ID and the opposite vector: several images of one
/// atom can be in reach of a small cell, and the vector tells them apart.
///
/// The exchanges go where the caller's take them (FeatureExchange::rows_in_model_memory): rows
/// as they are where it takes the builder's memory (a /kk style, whose KOKKOS package packs pair
/// communication on its device), else host rows, which rows in a device's memory are staged
/// through (exchange_on_host.hpp): a count per node and four values per slot, once per step.
/// Where the caller names every ghost's owner (ghost_owners(): one rank holding the whole system)
/// both are done here instead (image_exchange.hpp).
#include <Kokkos_Core.hpp>
#include <climits>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/grow_rows.hpp"
#include "graph/atom_graph.hpp"
#include "graph/impl/atom_graph_impl.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "models/chgnet/chgnet_model.hpp"
#include "models/exchange_on_host.hpp"
#include "models/image_exchange.hpp"

namespace fastmlip::models {

/// The caller's communication while slots are built: ChgnetExchange<double>'s forward (one count
/// per node) and forward_slots (four values per slot), and in between the layout those slots
/// follow, which the caller's forward_slots needs. Where rows_in_model_memory(), both take rows
/// in the builder's memory.
class ChgnetSlotExchange : public ChgnetExchange<double> {
 public:
  /// The slot layout, before the first forward_slots: `slot_start` [n_total + 1] in host memory,
  /// the same in the builder's memory as `model_slot_start` (what an exchange of rows there packs
  /// from; the same pointer where the host can read that memory), both valid until the next
  /// build, and the most slots any local node has.
  virtual void slot_layout(const int* slot_start, const int* model_slot_start, int n_total,
                           int local_max) = 0;
};

/// A short edge whose reverse is in none of its neighbor's slots: the neighbor is a ghost whose
/// owner does not hold the bond back (the ghosts reach less far than the atom-graph cutoff).
class UnpairedBondError : public InputError {
 public:
  UnpairedBondError(int edge, int center, int neighbor, double length)
      : InputError("ChgnetSlotBuilder: the short edge " + std::to_string(edge) + " from node " +
                   std::to_string(neighbor) + " to node " + std::to_string(center) + " (" +
                   std::to_string(length) + " A) has no reverse among node " + std::to_string(neighbor) +
                   "'s slots: its owner must hold every atom within the atom-graph cutoff of it"),
        edge(edge),
        center(center),
        neighbor(neighbor),
        length(length) {}
  int edge, center, neighbor;
  double length;  ///< A
};

namespace chgnet {

/// The three kernels, one functor with tagged launches. Positions [n_total][3] in double and
/// atom IDs [n_total] are views in the graph's memory (a LAMMPS style's own arrays).
template <class ExecSpace, class T, class Positions, class Tags>
struct SlotFunctor {
  using Memory = typename ExecSpace::memory_space;
  struct TagCount {};
  struct TagMost {};
  struct TagOffsets {};
  struct TagRecords {};
  struct TagMatch {};

  graph::AtomGraph<T, Memory> g;
  Positions x;
  Tags tag;
  double bond_sq = 0;
  Kokkos::View<double**, Kokkos::LayoutRight, Memory> count;    // [n_total][1]
  Kokkos::View<int*, Memory> slot_start;                        // [n_total + 1]
  Kokkos::View<double**, Kokkos::LayoutRight, Memory> records;  // [n_slots][4]: ID, vector
  Kokkos::View<int*, Memory> reverse_slot;                      // [num_edges]
  Kokkos::View<int, Memory> unpaired;                           // first edge without a partner

  KOKKOS_INLINE_FUNCTION static double magnitude(double a) { return a < 0 ? -a : a; }

  KOKKOS_INLINE_FUNCTION bool is_short(int i, int j, double v[3]) const {
    v[0] = x(j, 0) - x(i, 0);
    v[1] = x(j, 1) - x(i, 1);
    v[2] = x(j, 2) - x(i, 2);
    return v[0] * v[0] + v[1] * v[1] + v[2] * v[2] < bond_sq;
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagCount, int i) const {
    int n = 0;
    double v[3];
    for (int e = g.center_start(i); e < g.center_start(i + 1); ++e) {
      n += is_short(i, g.neighbor(e), v) ? 1 : 0;
    }
    count(i, 0) = n;
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagMost, int i, int& most) const {
    const int c = static_cast<int>(count(i, 0));
    if (c > most) {
      most = c;
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagOffsets, int i, int& sum, bool final) const {
    const int c = i < g.n_total ? static_cast<int>(count(i, 0)) : 0;
    if (final) {
      slot_start(i) = sum;
    }
    sum += c;
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagRecords, int i) const {
    int s = slot_start(i);
    double v[3];
    for (int e = g.center_start(i); e < g.center_start(i + 1); ++e) {
      const int j = g.neighbor(e);
      if (is_short(i, j, v)) {
        records(s, 0) = static_cast<double>(tag(j));
        records(s, 1) = v[0];
        records(s, 2) = v[1];
        records(s, 3) = v[2];
        ++s;
      }
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(TagMatch, int i) const {
    double v[3];
    const double own = static_cast<double>(tag(i));
    for (int e = g.center_start(i); e < g.center_start(i + 1); ++e) {
      const int j = g.neighbor(e);
      if (!is_short(i, j, v)) {
        reverse_slot(e) = -1;
        continue;
      }
      int best = -1;
      double best_dev = 1e-4;  // A; positions of images differ by rounding only
      for (int s = slot_start(j); s < slot_start(j + 1); ++s) {
        if (records(s, 0) != own) {
          continue;
        }
        const double dev = magnitude(records(s, 1) + v[0]) + magnitude(records(s, 2) + v[1]) +
                           magnitude(records(s, 3) + v[2]);
        if (dev < best_dev) {
          best_dev = dev;
          best = s;
        }
      }
      reverse_slot(e) = best;
      if (best < 0) {
        Kokkos::atomic_fetch_min(&unpaired(), e);
      }
    }
  }
};

}  // namespace chgnet

/// Builds the slots of a graph in ExecSpace's memory into buffers it keeps (grow-only) between
/// calls.
template <class ExecSpace>
class ChgnetSlotBuilder {
 public:
  using Memory = typename ExecSpace::memory_space;

  struct Slots {
    Kokkos::View<const int*, Memory> slot_start;    ///< [n_total + 1]
    Kokkos::View<const int*, Memory> reverse_slot;  ///< [num_edges]
  };

  /// The slots of `g` with short edges those shorter than `bond_cutoff` (A). `x` [n_total][3]
  /// (double) and `tag` [n_total] (IDs: equal for a ghost and its owner, distinct otherwise) are
  /// views in Memory. `exchange` may be null only when g.n_total == g.n_local. Throws
  /// UnpairedBondError naming the first short edge whose reverse is not found. The views stay
  /// valid until the next build.
  template <class T, class Positions, class Tags>
  Slots build(const graph::AtomGraph<T, Memory>& g, const Positions& x, const Tags& tag, double bond_cutoff,
              ChgnetSlotExchange* exchange) {
    if (g.n_total > g.n_local && exchange == nullptr) {
      throw InputError("ChgnetSlotBuilder: the graph has ghost nodes but no exchange");
    }
    using Functor = chgnet::SlotFunctor<ExecSpace, T, Positions, Tags>;
    const int NL = g.n_local, N = g.n_total, E = g.num_edges();
    Functor f;
    f.g = g;
    f.x = x;
    f.tag = tag;
    f.bond_sq = bond_cutoff * bond_cutoff;

    // (1) counts and the layout.
    f.count = m_count.get(N, 1);
    Kokkos::deep_copy(ExecSpace(), Kokkos::subview(f.count, Kokkos::make_pair(NL, N), Kokkos::ALL()), 0.0);
    Kokkos::parallel_for("fastmlip::chgnet::slots_count",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagCount>(0, NL), f);
    int local_max = 0;
    Kokkos::parallel_reduce("fastmlip::chgnet::slots_most",
                            Kokkos::RangePolicy<ExecSpace, typename Functor::TagMost>(0, NL), f,
                            Kokkos::Max<int>(local_max));
    m_images.set(exchange != nullptr ? exchange->ghost_owners() : nullptr, NL, N);
    if (m_images.active()) {
      m_images.forward(f.count);
    } else if (exchange) {
      exchange_node_rows<double>(*exchange, f.count, NL, true, m_staging);
    }
    grow_rows(m_slot_start, static_cast<std::size_t>(N) + 1, "fastmlip::chgnet::slot_start");
    f.slot_start = m_slot_start;
    Kokkos::parallel_scan("fastmlip::chgnet::slots_offsets",
                          Kokkos::RangePolicy<ExecSpace, typename Functor::TagOffsets>(0, N + 1), f);
    const auto start_host = host_slot_start(N);
    const int n_slots = start_host(N);
    if (exchange) {
      exchange->slot_layout(start_host.data(), m_slot_start.data(), N, local_max);
    }

    // (2) each slot's record; ghosts' from their owners.
    f.records = m_records.get(n_slots, 4);
    Kokkos::parallel_for("fastmlip::chgnet::slots_records",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagRecords>(0, NL), f);
    m_images.set_slots(f.slot_start, n_slots, start_host(NL));
    if (m_images.slots_active()) {
      m_images.forward_slots(f.records);
    } else if (exchange && exchange->rows_in_model_memory()) {
      exchange->forward_slots(f.records.data(), 4);
    } else if (exchange) {
      exchange_on_host(f.records, n_slots, ExchangeRows::any, m_staging,
                       [&](double* rows) { exchange->forward_slots(rows, 4); });
    }

    // (3) the reverse slot of every short edge.
    grow_rows(m_reverse_slot, static_cast<std::size_t>(E), "fastmlip::chgnet::reverse_slot");
    if (m_unpaired.data() == nullptr) {
      m_unpaired = Kokkos::View<int, Memory>("fastmlip::chgnet::unpaired_bond");
    }
    Kokkos::deep_copy(m_unpaired, INT_MAX);
    f.reverse_slot = m_reverse_slot;
    f.unpaired = m_unpaired;
    Kokkos::parallel_for("fastmlip::chgnet::slots_match",
                         Kokkos::RangePolicy<ExecSpace, typename Functor::TagMatch>(0, NL), f);
    int unpaired = INT_MAX;
    Kokkos::deep_copy(unpaired, m_unpaired);
    if (unpaired != INT_MAX) {
      const auto v = Kokkos::create_mirror_view_and_copy(
          Kokkos::HostSpace(),
          Kokkos::subview(g.vectors, Kokkos::make_pair(unpaired, unpaired + 1), Kokkos::ALL()));
      const double length =
          std::sqrt(double(v(0, 0)) * v(0, 0) + double(v(0, 1)) * v(0, 1) + double(v(0, 2)) * v(0, 2));
      throw UnpairedBondError(unpaired, graph::impl::host_value(g.center, unpaired),
                              graph::impl::host_value(g.neighbor, unpaired), length);
    }

    Slots out;
    out.slot_start = Kokkos::subview(m_slot_start, Kokkos::make_pair(0, N + 1));
    out.reverse_slot = Kokkos::subview(m_reverse_slot, Kokkos::make_pair(0, E));
    return out;
  }

  /// Bytes of the builder's buffers.
  double memory_usage() const {
    return static_cast<double>(m_slot_start.span() + m_slot_start_host.span() + m_reverse_slot.span()) *
           sizeof(int);
  }

 private:
  /// slot_start's first n + 1 entries in host memory: the view itself where the host can read
  /// it, else a copy.
  Kokkos::View<const int*, Kokkos::HostSpace> host_slot_start(int n) {
    const auto part = Kokkos::subview(m_slot_start, Kokkos::make_pair(0, n + 1));
    if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible) {
      ExecSpace().fence();
      return Kokkos::View<const int*, Kokkos::HostSpace>(part.data(), n + 1);
    } else {
      grow_rows(m_slot_start_host, static_cast<std::size_t>(n) + 1, "fastmlip::chgnet::slot_start_host");
      const auto host = Kokkos::subview(m_slot_start_host, Kokkos::make_pair(0, n + 1));
      Kokkos::deep_copy(host, part);
      return host;
    }
  }

  kernels::impl::GrowBuffer<double, Memory> m_count{"fastmlip::chgnet::slot_count"},
      m_records{"fastmlip::chgnet::slot_records"};
  kernels::impl::GrowBuffer<double, Kokkos::HostSpace> m_staging{"fastmlip::chgnet::slot_staging"};
  Kokkos::View<int*, Memory> m_slot_start, m_reverse_slot;
  Kokkos::View<int*, Kokkos::HostSpace> m_slot_start_host;
  Kokkos::View<int, Memory> m_unpaired;
  ImageExchange<ExecSpace> m_images;  // the exchanges, where the caller names the ghosts' owners
};

}  // namespace fastmlip::models
