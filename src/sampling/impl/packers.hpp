// SPDX-License-Identifier: MIT
#pragma once
/// \file The algorithms behind make_packer, and helpers they share. Internal to src/sampling.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/rng.hpp"
#include "sampling/sampler.hpp"

namespace fastmlip::sampling::impl {

std::unique_ptr<Packer> make_iterative();
std::unique_ptr<Packer> make_balanced_pairs();
std::unique_ptr<Packer> make_fixed_count();
std::unique_ptr<Packer> make_next_fit();
std::unique_ptr<Packer> make_ffd();
std::unique_ptr<Packer> make_fastmlip();

/// Stream ids for stream_seed: one per algorithm and purpose, so that e.g. next-fit and
/// fixed-count do not see the same shuffle for the same seed.
enum Stream : std::uint64_t {
  kIterativeShuffle = 1,
  kBalancedPairsShuffle = 2,
  kFixedCountShuffle = 3,
  kNextFitShuffle = 4,
  kFastmlipTies = 5,
  kFastmlipSteps = 6,
};

/// The regular graphs in a per-epoch random order (the DistributedSampler shuffle).
inline std::vector<std::int64_t> shuffled_regular(const PackInput& in, Stream stream) {
  std::vector<std::int64_t> order = in.regular;
  Rng rng(stream_seed(in.params.seed, in.params.epoch, stream));
  rng.shuffle(order.begin(), order.end());
  return order;
}

/// The graphs-per-batch of the count-based samplers: the user's choice, or the largest count
/// that never exceeds the capacity.
inline std::int64_t graphs_per_batch(const PackInput& in) {
  if (in.params.graphs_per_batch > 0) {
    return in.params.graphs_per_batch;
  }
  if (in.regular_max == 0) {
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(in.regular.size()));
  }
  return std::max<std::int64_t>(1, in.params.capacity / in.regular_max);
}

/// Bins from a bin id per graph (ids 0..nbins-1, -1 for graphs not in `graphs_in_order`):
/// counting sort, so graphs keep the order of `graphs_in_order` within their bin.
BinList bins_from_assignment(const std::vector<std::int64_t>& graphs_in_order,
                             const std::vector<std::int64_t>& bin_of_graph, std::int64_t nbins);

}  // namespace fastmlip::sampling::impl
