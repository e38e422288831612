// SPDX-License-Identifier: MIT
#pragma once
/// \file The edge index the fused message-passing kernels read: edges sorted by receiver
/// (so a receiver's incoming edges are one contiguous row and its sum needs no atomics), plus
/// the transpose by sender (so gradients with respect to sender features are gathered per
/// sender, again without atomics), built on the index's execution space. Sums run in a fixed
/// order: results are reproducible bit for bit.
#include <Kokkos_Core.hpp>
#include <climits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "graph/atom_graph.hpp"
#include "graph/impl/atom_graph_impl.hpp"  // host_value
#include "kernels/impl/edge_index_impl.hpp"
#include "kernels/impl/grow_buffer.hpp"
#include "kernels/impl/upload.hpp"

namespace fastmlip::kernels {

/// The arrays EdgeIndex builds (the receiver offsets and the transpose by sender): a model keeps
/// one and rebuilds its index there every step, allocating only when the graph grows
/// (impl/grow_buffer.hpp). An index built into it stays valid, but changes with the next build.
template <class ExecSpace>
struct EdgeIndexStorage {
  impl::GrowBuffer<int, ExecSpace> receiver_ptr{"fastmlip::edge_index::receiver_ptr"},
      sender_ptr{"fastmlip::edge_index::sender_ptr"}, cursor{"fastmlip::edge_index::cursor"},
      sender_edges{"fastmlip::edge_index::sender_edges"};
};

template <class ExecSpace>
struct EdgeIndex {
  int num_nodes = 0;
  /// Nodes 0..num_receivers-1 may receive edges, the rest (a graph's ghosts) only send: the
  /// TP's output and its adjoint have num_receivers rows. num_nodes for build() and from_edges().
  int num_receivers = 0;
  int num_edges = 0;
  Kokkos::View<const int*, ExecSpace>
      receiver_ptr;  ///< [num_nodes + 1]: edges of receiver n are [ptr(n), ptr(n+1))
  Kokkos::View<const int*, ExecSpace> sender;        ///< [E]
  Kokkos::View<const int*, ExecSpace> receiver;      ///< [E]
  Kokkos::View<const int*, ExecSpace> sender_ptr;    ///< [num_nodes + 1] into sender_edges
  Kokkos::View<const int*, ExecSpace> sender_edges;  ///< [E]: edge ids grouped by sender, ascending

  /// From a checked graph::AtomGraph in ExecSpace's memory (graph::check_graph): its centre and
  /// neighbor views are used as they are, its CSR offsets extended over the ghosts (which
  /// receive nothing); only the transpose by sender is built, on ExecSpace.
  template <class T>
  static EdgeIndex from_graph(const graph::AtomGraph<T, typename ExecSpace::memory_space>& g) {
    EdgeIndexStorage<ExecSpace> fresh;  // the index's views keep its arrays alive
    return from_graph(g, fresh);
  }
  /// As from_graph(g), its arrays in `storage` (no allocation once it is large enough).
  template <class T>
  static EdgeIndex from_graph(const graph::AtomGraph<T, typename ExecSpace::memory_space>& g,
                              EdgeIndexStorage<ExecSpace>& storage) {
    EdgeIndex out;
    const int N = g.n_total, E = g.num_edges();
    out.num_nodes = N;
    out.num_receivers = g.n_local;
    out.num_edges = E;
    out.sender = g.neighbor;
    out.receiver = g.center;
    Transpose f;
    f.m_center_start = g.center_start;
    f.m_num_local = g.n_local;
    f.m_num_edges = E;
    f.m_receiver_ptr = storage.receiver_ptr.vector(N + 1);
    Kokkos::parallel_for("fastmlip::edge_index::receiver_ptr",
                         Kokkos::RangePolicy<ExecSpace, typename Transpose::TagReceiverPtr>(0, N + 1), f);
    out.receiver_ptr = f.m_receiver_ptr;
    out.transpose(g.neighbor, storage);
    return out;
  }

  /// The edges of receivers [first, last) of `whole`, as an index of their own (a chunk): the
  /// same nodes, edge k of the chunk being edge edge_begin + k of `whole`, where [edge_begin,
  /// edge_end) = [whole.receiver_ptr(first), whole.receiver_ptr(last)), which the caller passes
  /// (it chose the chunks by them). Receivers outside the chunk have no edges in it. The
  /// kernels then run on the chunk's rows of the per-edge arrays only; a node's edges over the
  /// chunks, in chunk order, are its edges in the whole index in the same order, so sums over
  /// them add the same terms in the same order. Its arrays in `storage`, the sender and
  /// receiver views `whole`'s.
  static EdgeIndex chunk(const EdgeIndex& whole, int edge_begin, int edge_end,
                         EdgeIndexStorage<ExecSpace>& storage) {
    if (edge_begin < 0 || edge_end < edge_begin || edge_end > whole.num_edges) {
      throw InputError("EdgeIndex::chunk: edges [" + std::to_string(edge_begin) + ", " +
                       std::to_string(edge_end) + ") outside the index's " + std::to_string(whole.num_edges));
    }
    EdgeIndex out;
    out.num_nodes = whole.num_nodes;
    out.num_receivers = whole.num_receivers;
    out.num_edges = edge_end - edge_begin;
    const Kokkos::pair<int, int> rows(edge_begin, edge_end);
    out.sender = Kokkos::subview(whole.sender, rows);
    out.receiver = Kokkos::subview(whole.receiver, rows);
    Transpose f;
    f.m_center_start = whole.receiver_ptr;
    f.m_edge_begin = edge_begin;
    f.m_edge_end = edge_end;
    f.m_receiver_ptr = storage.receiver_ptr.vector(out.num_nodes + 1);
    Kokkos::parallel_for(
        "fastmlip::edge_index::chunk_receiver_ptr",
        Kokkos::RangePolicy<ExecSpace, typename Transpose::TagChunkPtr>(0, out.num_nodes + 1), f);
    out.receiver_ptr = f.m_receiver_ptr;
    out.transpose(out.sender, storage);
    return out;
  }

  /// From edge arrays already on ExecSpace (a trainer batch's labels where its tensors live):
  /// edges must be sorted by receiver (the neighbour-list order). The views are used as they are,
  /// so they must outlive the index; the receiver offsets and the transpose by sender are built
  /// on ExecSpace into `storage`. Any node may receive (num_receivers = num_nodes). Checked there
  /// first: throws InputError, prefixed "who: ", naming the first edge out of receiver order or
  /// naming a node outside 0..num_nodes-1. Its one host read is that check's result.
  static EdgeIndex from_edges(int num_nodes, const Kokkos::View<const int*, ExecSpace>& sender,
                              const Kokkos::View<const int*, ExecSpace>& receiver,
                              EdgeIndexStorage<ExecSpace>& storage,
                              const std::string& who = "EdgeIndex::from_edges") {
    if (sender.extent(0) != receiver.extent(0)) {
      throw InputError(who + ": " + std::to_string(sender.extent(0)) + " senders but " +
                       std::to_string(receiver.extent(0)) + " receivers");
    }
    if (num_nodes < 0) {
      throw InputError(who + ": " + std::to_string(num_nodes) + " nodes");
    }
    EdgeIndex g;
    g.num_nodes = num_nodes;
    g.num_receivers = num_nodes;
    g.num_edges = static_cast<int>(sender.extent(0));
    g.sender = sender;
    g.receiver = receiver;
    Transpose f;
    f.m_sender = sender;
    f.m_receiver = receiver;
    f.m_num_nodes = num_nodes;
    f.m_num_edges = g.num_edges;
    int bad = INT_MAX;
    Kokkos::parallel_reduce("fastmlip::edge_index::check_edges",
                            Kokkos::RangePolicy<ExecSpace, typename Transpose::TagCheckEdges>(0, g.num_edges),
                            f, Kokkos::Min<int>(bad));
    if (bad != INT_MAX) {
      throw_bad_edge(who, num_nodes, sender, receiver, bad);
    }
    f.m_receiver_ptr = storage.receiver_ptr.vector(num_nodes + 1);
    Kokkos::parallel_for("fastmlip::edge_index::receiver_offsets",
                         Kokkos::RangePolicy<ExecSpace, typename Transpose::TagLowerBound>(0, num_nodes + 1),
                         f);
    g.receiver_ptr = f.m_receiver_ptr;
    g.transpose(sender, storage);
    return g;
  }

  /// From host arrays, as from_edges (the same checks), the arrays copied to ExecSpace.
  static EdgeIndex build(int num_nodes, const std::vector<int>& sender, const std::vector<int>& receiver) {
    if (sender.size() != receiver.size()) {
      throw InputError("EdgeIndex::build: " + std::to_string(sender.size()) + " senders but " +
                       std::to_string(receiver.size()) + " receivers");
    }
    EdgeIndexStorage<ExecSpace> fresh;  // the index's views keep its arrays alive
    return from_edges(num_nodes, impl::upload<ExecSpace>(sender, "fastmlip::edge_index::sender"),
                      impl::upload<ExecSpace>(receiver, "fastmlip::edge_index::receiver"), fresh,
                      "EdgeIndex::build");
  }

 private:
  using Transpose = impl::EdgeTransposeFunctor<ExecSpace>;

  /// The message for edge e, the first that from_edges' check found bad (read back one value at
  /// a time: this runs once, on the way to an error).
  [[noreturn]] static void throw_bad_edge(const std::string& who, int num_nodes,
                                          const Kokkos::View<const int*, ExecSpace>& sender,
                                          const Kokkos::View<const int*, ExecSpace>& receiver, int e) {
    using graph::impl::host_value;
    const int s = host_value(sender, e), r = host_value(receiver, e);
    if (s < 0 || s >= num_nodes || r < 0 || r >= num_nodes) {
      throw InputError(who + ": edge " + std::to_string(e) + " (" + std::to_string(s) + " -> " +
                       std::to_string(r) + ") names a node outside 0.." + std::to_string(num_nodes - 1));
    }
    throw InputError(who + ": edges must be sorted by receiver; edge " + std::to_string(e) +
                     " has receiver " + std::to_string(r) + " after " +
                     std::to_string(host_value(receiver, e - 1)));
  }

  /// sender_ptr and sender_edges from `sender` (num_nodes and num_edges set): the edge ids
  /// grouped by sender in ascending order (so that the gradient kernels sum in a fixed order),
  /// built on ExecSpace (impl/edge_index_impl.hpp).
  void transpose(const Kokkos::View<const int*, ExecSpace>& sender_of_edge,
                 EdgeIndexStorage<ExecSpace>& storage) {
    Transpose f;
    f.m_sender = sender_of_edge;
    f.m_sender_ptr = storage.sender_ptr.zeros(num_nodes + 1);
    f.m_cursor = storage.cursor.zeros(num_nodes);
    f.m_sender_edges = storage.sender_edges.vector(num_edges);
    using Range = Kokkos::RangePolicy<ExecSpace, typename Transpose::TagCount>;
    Kokkos::parallel_for("fastmlip::edge_index::count_senders", Range(0, num_edges), f);
    Kokkos::parallel_scan("fastmlip::edge_index::sender_offsets",
                          Kokkos::RangePolicy<ExecSpace, typename Transpose::TagScan>(0, num_nodes + 1), f);
    Kokkos::parallel_for("fastmlip::edge_index::fill_senders",
                         Kokkos::RangePolicy<ExecSpace, typename Transpose::TagFill>(0, num_edges), f);
    Kokkos::parallel_for("fastmlip::edge_index::sort_senders",
                         Kokkos::RangePolicy<ExecSpace, typename Transpose::TagSort>(0, num_nodes), f);
    sender_ptr = f.m_sender_ptr;
    sender_edges = f.m_sender_edges;
  }
};

}  // namespace fastmlip::kernels
