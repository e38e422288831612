// SPDX-License-Identifier: MIT
// Nodes grouped by label on Kokkos' default execution space (a GPU's in a Kokkos-CUDA build, the
// host's in CI): the same offsets and order as a serial stable counting sort, at sizes around
// the sort's block of 256 nodes, into one reused storage; a bad label named.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <string>
#include <vector>

#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/impl/upload.hpp"
#include "kernels/node_groups.hpp"

namespace fastmlip::kernels {
namespace {

using Device = Kokkos::DefaultExecutionSpace;

std::vector<int> to_host(const Kokkos::View<int*, Device>& v) {
  const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return {h.data(), h.data() + h.extent(0)};
}

TEST(NodeGroupsOnTheDevice, EqualASerialStableCountingSort) {
  NodeGroupsStorage<Device> storage;
  for (int groups : {1, 5, 89}) {
    for (int N : {0, 1, 13, 255, 256, 257, 1000, 3001, 7}) {
      test::Uniform u(31 * N + groups);
      std::vector<int> label(N);
      for (int& l : label) {
        // Labels from the lower half only for some sizes: empty groups at the end too.
        l = static_cast<int>(u(0, N % 2 ? groups : (groups + 1) / 2));
      }
      std::vector<int> ptr(groups + 1, 0), nodes(N);
      for (int l : label) {
        ++ptr[l + 1];
      }
      for (int g = 0; g < groups; ++g) {
        ptr[g + 1] += ptr[g];
      }
      std::vector<int> fill(ptr.begin(), ptr.end() - 1);
      for (int n = 0; n < N; ++n) {
        nodes[fill[label[n]]++] = n;
      }
      const auto d = impl::upload<Device>(label, "test::labels");
      const auto built = NodeGroups<Device>::build(d, groups, "test", storage);
      EXPECT_EQ(to_host(built.ptr), ptr) << N << " nodes, " << groups << " groups";
      EXPECT_EQ(to_host(built.nodes), nodes) << N << " nodes, " << groups << " groups";
    }
  }
}

TEST(NodeGroupsOnTheDevice, ReuseTheirStorageAndNameABadLabel) {
  NodeGroupsStorage<Device> storage;
  const auto a =
      NodeGroups<Device>::build(impl::upload<Device>(std::vector<int>(500, 1), "a"), 3, "a", storage);
  const int* nodes = a.nodes.data();
  const auto b =
      NodeGroups<Device>::build(impl::upload<Device>(std::vector<int>(300, 2), "b"), 3, "b", storage);
  EXPECT_EQ(b.nodes.data(), nodes) << "a smaller build reuses the arrays";
  EXPECT_EQ(to_host(b.ptr), (std::vector<int>{0, 0, 0, 300}));
  std::vector<int> bad(40, 0);
  bad[7] = 5;
  bad[9] = -1;
  try {
    NodeGroups<Device>::build(impl::upload<Device>(bad, "bad"), 5, "batch 2", storage);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "batch 2: node 7 has element index 5; the weights cover 0..4");
  }
}

}  // namespace
}  // namespace fastmlip::kernels
