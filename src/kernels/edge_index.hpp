// SPDX-License-Identifier: MIT
#pragma once
/// \file The edge index the fused message-passing kernels read: edges sorted by receiver
/// (so a receiver's incoming edges are one contiguous row and its sum needs no atomics), plus
/// the transpose by sender (so gradients with respect to sender features are gathered per
/// sender, again without atomics). Sums run in a fixed order: results are reproducible bit
/// for bit.
#include <Kokkos_Core.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "graph/atom_graph.hpp"

namespace fastmlip::kernels {

template <class ExecSpace>
struct EdgeIndex {
  int num_nodes = 0;
  int num_edges = 0;
  Kokkos::View<const int*, ExecSpace> receiver_ptr;  ///< [num_nodes + 1]: edges of receiver n are [ptr(n), ptr(n+1))
  Kokkos::View<const int*, ExecSpace> sender;        ///< [E]
  Kokkos::View<const int*, ExecSpace> receiver;      ///< [E]
  Kokkos::View<const int*, ExecSpace> sender_ptr;    ///< [num_nodes + 1] into sender_edges
  Kokkos::View<const int*, ExecSpace> sender_edges;  ///< [E]: edge ids grouped by sender, ascending

  /// From a checked graph::AtomGraph in ExecSpace's memory (graph::check_graph): its centre and
  /// neighbor views are used as they are, its CSR offsets extended over the ghosts (which
  /// receive nothing); only the transpose by sender is built. Host-accessible memory only, for
  /// now: the transpose is built by a host loop.
  template <class T>
  static EdgeIndex from_graph(const graph::AtomGraph<T, typename ExecSpace::memory_space>& g) {
    static_assert(Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible,
                  "EdgeIndex::from_graph: the transpose is built on the host");
    EdgeIndex out;
    const int N = g.n_total, L = g.n_local, E = g.num_edges();
    out.num_nodes = N;
    out.num_edges = E;
    out.sender = g.neighbor;
    out.receiver = g.center;
    Kokkos::View<int*, ExecSpace> rptr(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "fastmlip::edge_index::receiver_ptr"), N + 1);
    Kokkos::View<int*, ExecSpace> sptr("fastmlip::edge_index::sender_ptr", N + 1);
    Kokkos::View<int*, ExecSpace> sedges(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "fastmlip::edge_index::sender_edges"), E);
    for (int n = 0; n <= N; ++n) {
      rptr(n) = n <= L ? g.center_start(n) : E;
    }
    transpose(N, E, g.neighbor, sptr, sedges);
    out.receiver_ptr = rptr;
    out.sender_ptr = sptr;
    out.sender_edges = sedges;
    return out;
  }

  /// From host arrays. Edges must be sorted by receiver (the neighbour-list order); throws
  /// InputError naming the first edge out of order or an index out of range.
  static EdgeIndex build(int num_nodes, const std::vector<int>& sender, const std::vector<int>& receiver) {
    if (sender.size() != receiver.size()) {
      throw InputError("EdgeIndex::build: " + std::to_string(sender.size()) + " senders but " +
                       std::to_string(receiver.size()) + " receivers");
    }
    EdgeIndex g;
    g.num_nodes = num_nodes;
    g.num_edges = static_cast<int>(sender.size());
    const int E = g.num_edges;
    Kokkos::View<int*, ExecSpace> rptr("fastmlip::edge_index::receiver_ptr", num_nodes + 1);
    Kokkos::View<int*, ExecSpace> sptr("fastmlip::edge_index::sender_ptr", num_nodes + 1);
    Kokkos::View<int*, ExecSpace> snd("fastmlip::edge_index::sender", E);
    Kokkos::View<int*, ExecSpace> rcv("fastmlip::edge_index::receiver", E);
    Kokkos::View<int*, ExecSpace> sedges("fastmlip::edge_index::sender_edges", E);
    auto h_rptr = Kokkos::create_mirror_view(rptr);
    auto h_sptr = Kokkos::create_mirror_view(sptr);
    auto h_s = Kokkos::create_mirror_view(snd);
    auto h_r = Kokkos::create_mirror_view(rcv);
    auto h_se = Kokkos::create_mirror_view(sedges);
    std::vector<int> count_r(num_nodes + 1, 0);
    for (int e = 0; e < E; ++e) {
      if (sender[e] < 0 || sender[e] >= num_nodes || receiver[e] < 0 || receiver[e] >= num_nodes) {
        throw InputError("EdgeIndex::build: edge " + std::to_string(e) + " (" + std::to_string(sender[e]) + " -> " +
                         std::to_string(receiver[e]) + ") names a node outside 0.." + std::to_string(num_nodes - 1));
      }
      if (e > 0 && receiver[e] < receiver[e - 1]) {
        throw InputError("EdgeIndex::build: edges must be sorted by receiver; edge " + std::to_string(e) +
                         " has receiver " + std::to_string(receiver[e]) + " after " + std::to_string(receiver[e - 1]));
      }
      h_s(e) = sender[e];
      h_r(e) = receiver[e];
      ++count_r[receiver[e] + 1];
    }
    for (int n = 0; n < num_nodes; ++n) {
      count_r[n + 1] += count_r[n];
    }
    for (int n = 0; n <= num_nodes; ++n) {
      h_rptr(n) = count_r[n];
    }
    Kokkos::deep_copy(h_sptr, 0);
    transpose(num_nodes, E, h_s, h_sptr, h_se);
    Kokkos::deep_copy(rptr, h_rptr);
    Kokkos::deep_copy(sptr, h_sptr);
    Kokkos::deep_copy(snd, h_s);
    Kokkos::deep_copy(rcv, h_r);
    Kokkos::deep_copy(sedges, h_se);
    g.receiver_ptr = rptr;
    g.sender_ptr = sptr;
    g.sender = snd;
    g.receiver = rcv;
    g.sender_edges = sedges;
    return g;
  }

 private:
  /// The transpose by sender of E edges, on the host: sptr [num_nodes + 1], zero on entry,
  /// gets the offsets, sedges [E] the edge ids grouped by sender in ascending order (so that
  /// the gradient kernels sum in a fixed order).
  template <class Senders, class Ptr, class Ids>
  static void transpose(int num_nodes, int E, const Senders& sender, const Ptr& sptr, const Ids& sedges) {
    for (int e = 0; e < E; ++e) {
      ++sptr(sender(e) + 1);
    }
    for (int n = 0; n < num_nodes; ++n) {
      sptr(n + 1) += sptr(n);
    }
    std::vector<int> fill(sptr.data(), sptr.data() + num_nodes);
    for (int e = 0; e < E; ++e) {
      sedges(fill[sender(e)]++) = e;
    }
  }
};

}  // namespace fastmlip::kernels
