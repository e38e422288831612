// SPDX-License-Identifier: MIT
// next-fit: fairchem's max-atoms batching. Shuffle each epoch, then fill the open batch until
// the next graph would exceed the capacity, close it and open a new one (no going back to
// earlier batches: one pass, O(N)).
#include "sampling/impl/packers.hpp"

namespace fastmlip::sampling::impl {
namespace {

class NextFit final : public Packer {
 public:
  std::string name() const override { return "next-fit"; }
  std::string summary() const override {
    return "shuffled order, each batch filled until the next overflows (fairchem)";
  }
  BinList pack(const PackInput& in) const override {
    const std::int64_t cap = in.params.capacity;
    BinList bins;
    std::int64_t load = 0;
    bool open = false;
    for (std::int64_t g : shuffled_regular(in, kNextFitShuffle)) {
      const std::int64_t s = in.sizes[g];
      if (open && load + s > cap) {
        bins.close();
        load = 0;
      }
      bins.add(g);
      load += s;
      open = true;
    }
    if (open) {
      bins.close();
    }
    bins.add_singletons(in.oversize);
    return bins;
  }
};

}  // namespace

std::unique_ptr<Packer> make_next_fit() { return std::make_unique<NextFit>(); }

}  // namespace fastmlip::sampling::impl
