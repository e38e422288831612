// SPDX-License-Identifier: MIT
// The edge index built from edge arrays in the memory of Kokkos' default execution space (a
// GPU's in a Kokkos-CUDA build, where the trainer builds each MACE batch's index this way; the
// host's in CI): the same offsets and transpose as the index built on the host from the same
// edges, at odd sizes, and a bad edge named from device memory.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../common/random_graph.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/edge_index.hpp"
#include "kernels/impl/upload.hpp"

namespace fastmlip::kernels {
namespace {

using Device = Kokkos::DefaultExecutionSpace;
using Host = Kokkos::DefaultHostExecutionSpace;

/// Labels in the default execution space's memory.
Kokkos::View<const int*, Device> on_device(const std::vector<int>& v) {
  return impl::upload<Device>(v, "test::labels");
}

template <class Space>
std::vector<int> to_host(const Kokkos::View<const int*, Space>& v) {
  const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return {h.data(), h.data() + h.extent(0)};
}

TEST(EdgeIndexOnTheDevice, FromEdgesThereEqualsTheHostIndex) {
  for (int N : test::test_sizes()) {
    const int nodes = std::min(N, 500), edges = 6 * nodes + N % 3;
    const auto g = test::random_graph(nodes, edges, 31 + N);
    const std::vector<int>&s = g.sender, &r = g.receiver;
    const auto host = EdgeIndex<Host>::build(nodes, s, r);
    const auto snd = on_device(s), rcv = on_device(r);
    EdgeIndexStorage<Device> storage;
    // Twice into the same storage: the second build reuses its arrays and gives the same index.
    for (int pass = 0; pass < 2; ++pass) {
      const auto dev = EdgeIndex<Device>::from_edges(nodes, snd, rcv, storage, "test");
      ASSERT_EQ(dev.num_nodes, nodes);
      ASSERT_EQ(dev.num_edges, static_cast<int>(s.size()));
      EXPECT_EQ(dev.sender.data(), snd.data()) << "the labels are read in place";
      EXPECT_EQ(to_host(dev.receiver_ptr), to_host(host.receiver_ptr)) << "N " << N;
      EXPECT_EQ(to_host(dev.sender_ptr), to_host(host.sender_ptr)) << "N " << N;
      EXPECT_EQ(to_host(dev.sender_edges), to_host(host.sender_edges)) << "N " << N;
    }
  }
}

TEST(EdgeIndexOnTheDevice, ABadEdgeIsNamed) {
  const auto g = test::random_graph(40, 300, 5);
  const std::vector<int>&s = g.sender, &r = g.receiver;
  std::vector<int> unsorted = r;
  ASSERT_LT(r[100], r[250]);
  std::swap(unsorted[100], unsorted[250]);
  std::vector<int> outside = s;
  outside[123] = 40;
  EdgeIndexStorage<Device> storage;
  const auto message = [&](const std::vector<int>& snd, const std::vector<int>& rcv) {
    try {
      EdgeIndex<Device>::from_edges(40, on_device(snd), on_device(rcv), storage, "batch 3");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  int first_bad = 1;  // the first edge whose receiver is below its predecessor's
  while (unsorted[first_bad] >= unsorted[first_bad - 1]) {
    ++first_bad;
  }
  EXPECT_EQ(message(s, unsorted), "batch 3: edges must be sorted by receiver; edge " +
                                      std::to_string(first_bad) + " has receiver " +
                                      std::to_string(unsorted[first_bad]) + " after " +
                                      std::to_string(unsorted[first_bad - 1]));
  EXPECT_EQ(message(outside, r),
            "batch 3: edge 123 (40 -> " + std::to_string(r[123]) + ") names a node outside 0..39");
}

}  // namespace
}  // namespace fastmlip::kernels
