// SPDX-License-Identifier: MIT
// ffd: first-fit decreasing (Johnson 1973; Garey & Johnson 1979). Graphs by size, largest
// first (ties by index: the classic deterministic algorithm, the same plan every epoch), each
// into the lowest-numbered bin with room, opening a new bin when none has.
//
// "Lowest-numbered bin with room" is a leftmost-search in a max-tree over the bins' remaining
// capacities, O(log B) per graph. Unopened slots hold the full capacity, so the leftmost slot
// with room is either an open bin or the next bin to open. Any-fit algorithms never leave two
// bins at most half full, so they use fewer than 2 T / C + 1 bins for total size T: that bounds
// the tree.
#include <algorithm>

#include "sampling/impl/packers.hpp"

namespace fastmlip::sampling::impl {
namespace {

class Ffd final : public Packer {
 public:
  std::string name() const override { return "ffd"; }
  std::string summary() const override { return "first-fit decreasing (classic; the same plan every epoch)"; }
  BinList pack(const PackInput& in) const override {
    const std::int64_t cap = in.params.capacity;
    std::vector<std::int64_t> order = in.regular;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int64_t a, std::int64_t b) { return in.sizes[a] > in.sizes[b]; });
    const std::int64_t bound =
        std::min<std::int64_t>(static_cast<std::int64_t>(order.size()), 2 * (in.regular_total / cap) + 3);
    std::int64_t leaves = 1;
    while (leaves < std::max<std::int64_t>(bound, 1)) {
      leaves *= 2;
    }
    // room[1] is the root; the leaves (one per bin slot) are room[leaves .. 2 leaves).
    std::vector<std::int64_t> room(2 * static_cast<std::size_t>(leaves), cap);
    std::vector<std::int64_t> bin_of(in.sizes.size(), -1);
    std::int64_t opened = 0;
    for (std::int64_t g : order) {
      const std::int64_t s = in.sizes[g];
      std::int64_t node = 1;
      while (node < leaves) {
        node = room[2 * node] >= s ? 2 * node : 2 * node + 1;
      }
      const std::int64_t b = node - leaves;
      bin_of[g] = b;
      opened = std::max(opened, b + 1);
      room[node] -= s;
      for (node /= 2; node >= 1; node /= 2) {
        room[node] = std::max(room[2 * node], room[2 * node + 1]);
      }
    }
    BinList bins = bins_from_assignment(order, bin_of, opened);
    bins.add_singletons(in.oversize);
    return bins;
  }
};

}  // namespace

std::unique_ptr<Packer> make_ffd() { return std::make_unique<Ffd>(); }

}  // namespace fastmlip::sampling::impl
