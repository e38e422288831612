// SPDX-License-Identifier: MIT
#pragma once
// The channelwise TP's chunked passes as a model's layer runs them (MaceOptions::edge_chunk):
// one driver for the host test of the Kokkos path's bits and the device test of both backends,
// so that both run the calls in the same order.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/edge_index.hpp"

namespace fastmlip::test {

/// Offsets of each receiver's edges in a list sorted by receiver: receivers [0, R), on the host.
inline std::vector<int> receiver_offsets(const std::vector<int>& receiver, int R) {
  std::vector<int> ptr(R + 1, 0);
  for (int r : receiver) {
    ++ptr[r + 1];
  }
  for (int n = 0; n < R; ++n) {
    ptr[n + 1] += ptr[n];
  }
  return ptr;
}

/// k's forward (into out) and reverse (into grad_x, grad_Y, grad_w) over g in chunks of
/// per_chunk receivers, each chunk's per-edge rows sliced as a model slices them; ptr from
/// receiver_offsets. M: dense row-major views on g's execution space.
template <class TP, class Exec, class M>
void run_tp_in_chunks(const TP& k, const kernels::EdgeIndex<Exec>& g, const std::vector<int>& ptr,
                      int per_chunk, const M& x, const M& Y, const M& w, const M& grad_out, const M& out,
                      const M& grad_x, const M& grad_Y, const M& grad_w) {
  const int R = static_cast<int>(ptr.size()) - 1;
  const std::size_t d2 = Y.extent(1), wn = w.extent(1);
  kernels::EdgeIndexStorage<Exec> storage;
  auto chunk_of = [&](int first, int last) {
    const auto chunk = kernels::EdgeIndex<Exec>::chunk(g, ptr[first], ptr[last], storage);
    EXPECT_EQ(chunk.num_edges, ptr[last] - ptr[first]) << "receivers [" << first << ", " << last << ")";
    return chunk;
  };
  k.begin_chunks(x);
  for (int first = 0; first < R; first += per_chunk) {
    const int last = std::min(R, first + per_chunk);
    const Kokkos::pair<int, int> rows(ptr[first], ptr[last]);
    k.compute_chunk(chunk_of(first, last), first, last, Kokkos::subview(Y, rows, Kokkos::ALL),
                    Kokkos::subview(w, rows, Kokkos::ALL), out);
  }
  k.begin_reverse_chunks(x, grad_out);
  for (int first = 0; first < R; first += per_chunk) {
    const int last = std::min(R, first + per_chunk);
    const Kokkos::pair<int, int> rows(ptr[first], ptr[last]);
    const int E = ptr[last] - ptr[first];
    k.reverse_chunk(chunk_of(first, last), Kokkos::subview(Y, rows, Kokkos::ALL),
                    Kokkos::subview(w, rows, Kokkos::ALL), M(grad_Y.data() + ptr[first] * d2, E, d2),
                    M(grad_w.data() + ptr[first] * wn, E, wn));
  }
  k.end_reverse_chunks(grad_x);
}

}  // namespace fastmlip::test
