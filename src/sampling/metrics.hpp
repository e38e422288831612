// SPDX-License-Identifier: MIT
#pragma once
/// \file How good a plan is: the figures PACKING.md asks for, defined exactly.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sampling/sampler.hpp"

namespace fastmlip::sampling {

/// Quality of one epoch's plan. L(t, r) is the load of the bin rank r runs at step t.
struct PlanMetrics {
  std::int64_t graphs = 0;
  std::int64_t bins = 0;
  std::int64_t steps = 0;
  /// 1 - sum of sizes / (bins x capacity): the share of allocated batch memory that is
  /// padding. 0 for an empty plan; below 0 only when oversize graphs have bins of their own.
  double padding_fraction = 0.0;
  /// sum_t max_r L(t, r) / sum_t mean_r L(t, r). A synchronous data-parallel step lasts as long
  /// as its heaviest rank, so this is the epoch time over the time with perfect balance (load
  /// taken as the cost): 1 is perfect, 1.1 means 10% of the epoch is spent waiting on
  /// stragglers. 1 for an empty plan or all-zero loads.
  double load_max_over_mean = 1.0;
  /// Coefficient of variation (population standard deviation / mean) of L(t, r) over all
  /// steps and ranks, padding bins included. FastCHGNet's figure of merit (0.186 default
  /// batching, 0.064 with their sampler). 0 for an empty plan or all-zero loads.
  double load_cv = 0.0;
};

/// The figures of `plan` (from its bin loads).
PlanMetrics measure_plan(const Plan& plan);

/// Randomness between epochs: of all unordered pairs of distinct graphs that share a bin in
/// `first`, the fraction that share a bin in `second` too. 1 means the same batches again (up to
/// order), a value near epoch_overlap_random(second) means batches as mixed as random ones.
/// 0 when `first` has no pair. Both plans must cover the same graphs. O(N log(graphs per bin))
/// time and O(N) memory: each bin of `first` looks up its graphs' bins in `second` and counts
/// equal ids, so millions of graphs take well under a second.
double epoch_overlap(const Plan& first, const Plan& second);

/// What epoch_overlap would be, in expectation, if `second`'s bins (their sizes m_b kept) were
/// filled by a uniformly random permutation of the graphs: sum_b m_b (m_b - 1) / (N (N - 1)).
/// The floor no sampler with these batch sizes can go below on average.
double epoch_overlap_random(const Plan& second);

}  // namespace fastmlip::sampling
