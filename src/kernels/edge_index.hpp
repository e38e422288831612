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

namespace fastmlip::kernels {

template <class ExecSpace>
struct EdgeIndex {
  int num_nodes = 0;
  int num_edges = 0;
  Kokkos::View<int*, ExecSpace> receiver_ptr;  ///< [num_nodes + 1]: edges of receiver n are [ptr(n), ptr(n+1))
  Kokkos::View<int*, ExecSpace> sender;        ///< [E]
  Kokkos::View<int*, ExecSpace> receiver;      ///< [E]
  Kokkos::View<int*, ExecSpace> sender_ptr;    ///< [num_nodes + 1] into sender_edges
  Kokkos::View<int*, ExecSpace> sender_edges;  ///< [E]: edge ids grouped by sender, ascending

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
    g.receiver_ptr = Kokkos::View<int*, ExecSpace>("fastmlip::edge_index::receiver_ptr", num_nodes + 1);
    g.sender_ptr = Kokkos::View<int*, ExecSpace>("fastmlip::edge_index::sender_ptr", num_nodes + 1);
    g.sender = Kokkos::View<int*, ExecSpace>("fastmlip::edge_index::sender", E);
    g.receiver = Kokkos::View<int*, ExecSpace>("fastmlip::edge_index::receiver", E);
    g.sender_edges = Kokkos::View<int*, ExecSpace>("fastmlip::edge_index::sender_edges", E);
    auto h_rptr = Kokkos::create_mirror_view(g.receiver_ptr);
    auto h_sptr = Kokkos::create_mirror_view(g.sender_ptr);
    auto h_s = Kokkos::create_mirror_view(g.sender);
    auto h_r = Kokkos::create_mirror_view(g.receiver);
    auto h_se = Kokkos::create_mirror_view(g.sender_edges);
    std::vector<int> count_r(num_nodes + 1, 0), count_s(num_nodes + 1, 0);
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
      ++count_s[sender[e] + 1];
    }
    for (int n = 0; n < num_nodes; ++n) {
      count_r[n + 1] += count_r[n];
      count_s[n + 1] += count_s[n];
    }
    std::vector<int> fill(count_s.begin(), count_s.end() - 1);
    for (int e = 0; e < E; ++e) {
      h_se(fill[sender[e]]++) = e;
    }
    for (int n = 0; n <= num_nodes; ++n) {
      h_rptr(n) = count_r[n];
      h_sptr(n) = count_s[n];
    }
    Kokkos::deep_copy(g.receiver_ptr, h_rptr);
    Kokkos::deep_copy(g.sender_ptr, h_sptr);
    Kokkos::deep_copy(g.sender, h_s);
    Kokkos::deep_copy(g.receiver, h_r);
    Kokkos::deep_copy(g.sender_edges, h_se);
    return g;
  }
};

}  // namespace fastmlip::kernels
