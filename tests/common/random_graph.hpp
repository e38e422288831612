// SPDX-License-Identifier: MIT
#pragma once
// Random edge lists for the kernel tests that take a graph (the channelwise TP on every backend,
// the edge index): one generator, so that every backend's test sees the same graphs.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "tolerance.hpp"

namespace fastmlip::test {

struct RandomGraph {
  std::vector<int> sender, receiver;
};

/// `edges` random edges between `nodes` nodes, sorted by receiver (stably), with isolated nodes,
/// repeated pairs and self-loops (periodic images) as chance gives them; none without nodes.
inline RandomGraph random_graph(int nodes, int edges, std::uint64_t seed) {
  Uniform u(seed);
  std::vector<std::pair<int, int>> rs;  // (receiver, sender)
  for (int e = 0; nodes > 0 && e < edges; ++e) {
    const int r = static_cast<int>(u(0, nodes));
    rs.emplace_back(r, static_cast<int>(u(0, nodes)));
  }
  std::stable_sort(rs.begin(), rs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  RandomGraph g;
  for (const auto& [r, s] : rs) {
    g.receiver.push_back(r);
    g.sender.push_back(s);
  }
  return g;
}

}  // namespace fastmlip::test
