// SPDX-License-Identifier: MIT
#pragma once
// The edge index's transpose by sender as Kokkos stages on the index's execution space, so that
// a graph on a device is indexed where it lives: count each sender's edges (atomics), scan to
// offsets, place each edge in its sender's range (atomics: any order), then sort each sender's
// range by edge id. The sort makes the result independent of the order the atomics took: the
// same ids in the same order as a serial stable transpose, bit for bit on every backend. Its cost
// is the square of a sender's edge count (an insertion sort), small for neighbour lists; on a
// host backend the ranges are already in order and the sort is one pass.
#include <Kokkos_Core.hpp>

namespace fastmlip::kernels::impl {

template <class ExecSpace>
struct EdgeTransposeFunctor {
  struct TagReceiverPtr {};  // receiver_ptr(n) = center_start(n) for local n, E for ghosts
  struct TagCount {};        // sender_ptr(s + 1) += 1 for each edge from s
  struct TagScan {};         // sender_ptr: counts to offsets
  struct TagFill {};         // sender_edges: each edge somewhere in its sender's range
  struct TagSort {};         // each sender's range in ascending edge order
  struct TagChunkPtr {};     // a chunk's receiver_ptr: the whole index's, clamped to its edges
  struct TagCheckEdges {};   // the first edge naming a node outside 0..N-1 or out of receiver order
  struct TagLowerBound {};   // receiver_ptr(n): the first edge whose receiver is n or more

  Kokkos::View<const int*, ExecSpace> m_sender;
  Kokkos::View<const int*, ExecSpace> m_center_start;
  Kokkos::View<const int*, ExecSpace> m_receiver;  // TagCheckEdges, TagLowerBound
  Kokkos::View<int*, ExecSpace> m_receiver_ptr, m_sender_ptr, m_cursor, m_sender_edges;
  int m_num_local = 0, m_num_edges = 0;
  int m_num_nodes = 0;                   // TagCheckEdges
  int m_edge_begin = 0, m_edge_end = 0;  // TagChunkPtr: the chunk's edges in the whole index

  KOKKOS_INLINE_FUNCTION void operator()(TagReceiverPtr, int n) const {
    m_receiver_ptr(n) = n <= m_num_local ? m_center_start(n) : m_num_edges;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagChunkPtr, int n) const {
    const int e = m_center_start(n);
    m_receiver_ptr(n) = (e < m_edge_begin ? m_edge_begin : e > m_edge_end ? m_edge_end : e) - m_edge_begin;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagCheckEdges, int e, int& first_bad) const {
    const int s = m_sender(e), r = m_receiver(e);
    const bool bad =
        s < 0 || s >= m_num_nodes || r < 0 || r >= m_num_nodes || (e > 0 && r < m_receiver(e - 1));
    if (bad && e < first_bad) {
      first_bad = e;
    }
  }
  // A binary search rather than a count and a scan: no atomics, and each node is one read-only
  // search over edges already in receiver order.
  KOKKOS_INLINE_FUNCTION void operator()(TagLowerBound, int n) const {
    int lo = 0, hi = m_num_edges;
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (m_receiver(mid) < n) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    m_receiver_ptr(n) = lo;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagCount, int e) const {
    Kokkos::atomic_add(&m_sender_ptr(m_sender(e) + 1), 1);
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagScan, int n, int& sum, bool final) const {
    sum += m_sender_ptr(n);
    if (final) {
      m_sender_ptr(n) = sum;
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagFill, int e) const {
    const int s = m_sender(e);
    m_sender_edges(m_sender_ptr(s) + Kokkos::atomic_fetch_add(&m_cursor(s), 1)) = e;
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagSort, int s) const {
    const int begin = m_sender_ptr(s), end = m_sender_ptr(s + 1);
    for (int k = begin + 1; k < end; ++k) {
      const int e = m_sender_edges(k);
      int j = k;
      for (; j > begin && m_sender_edges(j - 1) > e; --j) {
        m_sender_edges(j) = m_sender_edges(j - 1);
      }
      m_sender_edges(j) = e;
    }
  }
};

}  // namespace fastmlip::kernels::impl
