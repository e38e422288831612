// SPDX-License-Identifier: MIT
// fixed-count: what PyTorch Geometric's DataLoader and mace-torch's DistributedSampler +
// batch_size do. Shuffle the graphs each epoch and cut the order into batches of G graphs.
//
// G is PackParams::graphs_per_batch, or by default the largest count that can never overflow,
// floor(capacity / largest size): a user of these samplers picks the batch size for the worst
// case, since a batch larger than the GPU memory fails. A user-chosen G may overflow; the
// capacity rule still holds because a batch is then cut early, before the graph that would
// overflow it (that graph starts the next batch).
#include "sampling/impl/packers.hpp"

namespace fastmlip::sampling::impl {
namespace {

class FixedCount final : public Packer {
 public:
  std::string name() const override { return "fixed-count"; }
  std::string summary() const override {
    return "G graphs per batch from a shuffled order (PyG, mace-torch)";
  }
  BinList pack(const PackInput& in) const override {
    const std::int64_t per_batch = graphs_per_batch(in);
    const std::int64_t cap = in.params.capacity;
    BinList bins;
    std::int64_t count = 0, load = 0;
    for (std::int64_t g : shuffled_regular(in, kFixedCountShuffle)) {
      const std::int64_t s = in.sizes[g];
      if (count == per_batch || load + s > cap) {
        bins.close();
        count = load = 0;
      }
      bins.add(g);
      ++count;
      load += s;
    }
    if (count > 0) {
      bins.close();
    }
    bins.add_singletons(in.oversize);
    return bins;
  }
};

}  // namespace

std::unique_ptr<Packer> make_fixed_count() { return std::make_unique<FixedCount>(); }

}  // namespace fastmlip::sampling::impl
