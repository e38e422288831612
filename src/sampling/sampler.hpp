// SPDX-License-Identifier: MIT
#pragma once
/// \file The bin-packing batch sampler: graphs of varying size into batches ("bins") of a
/// fixed capacity, spread over W ranks with the same number of steps on each.
///
/// Every algorithm sits behind one interface (Packer) and obeys the same rules, which
/// make_plan checks on every plan it returns:
/// - each graph is in exactly one bin per epoch;
/// - no bin's load (sum of its graphs' sizes) exceeds the capacity, except a bin holding a
///   single oversize graph when PackParams::allow_oversize is set (otherwise such a graph is an
///   InputError naming it);
/// - the number of bins is a multiple of W (empty bins pad where an algorithm leaves fewer);
/// - the plan is a pure function of (sizes, algorithm, parameters, epoch, seed): every rank
///   computes it alone and gets the same plan, no communication.
///
/// Layout: bins are step-major. Bin b runs on rank b % W at step b / W, so the W bins of one
/// step run concurrently and their loads should be equal.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fastmlip::sampling {

/// Parameters shared by all algorithms (each ignores those it has no use for).
struct PackParams {
  /// Tokens per bin, in the units of the sizes (atoms for the MACE paper: 3072 for fp32 on an
  /// A100). Must be positive.
  std::int64_t capacity = 3072;
  /// World size W: the number of bins is a multiple of it. Must be positive.
  std::int64_t ranks = 1;
  /// Epoch number; algorithms with randomness draw a fresh plan per epoch.
  std::uint64_t epoch = 0;
  /// User seed; the same on every rank.
  std::uint64_t seed = 0;
  /// Give each graph larger than the capacity a bin of its own instead of raising InputError.
  bool allow_oversize = false;
  /// fixed-count and balanced-pairs: graphs per batch (per rank). 0 picks the largest count
  /// that can never exceed the capacity, floor(capacity / largest size), which is how a batch
  /// size is chosen for those samplers in practice (the MACE paper's baseline used 4 to 8).
  std::int64_t graphs_per_batch = 0;
  /// fastmlip: graphs whose sizes differ by at most this fraction are interchangeable, and are
  /// shuffled among themselves each epoch. 0 randomises only among exactly equal sizes.
  double tie_tolerance = 0.05;
  /// fastmlip: passes of the heaviest/lightest pair swap search after the greedy assignment.
  std::int64_t swap_passes = 2;
};

/// One epoch's batches for all ranks, in CSR form.
struct Plan {
  std::string algorithm;
  std::int64_t ranks = 1;
  std::int64_t capacity = 0;
  std::uint64_t epoch = 0;
  /// num_bins() + 1 entries; bin b holds graphs[offsets[b] .. offsets[b + 1]).
  std::vector<std::int64_t> offsets{0};
  /// Graph indices (into the sizes given to make_plan), bin after bin.
  std::vector<std::int64_t> graphs;
  /// Sum of the sizes of each bin's graphs.
  std::vector<std::int64_t> loads;

  std::size_t num_bins() const noexcept { return loads.size(); }
  std::size_t num_graphs() const noexcept { return graphs.size(); }
  /// Steps per epoch: num_bins() / ranks, the same on every rank.
  std::size_t steps() const noexcept { return ranks > 0 ? num_bins() / static_cast<std::size_t>(ranks) : 0; }
  /// The bin that `rank` processes at `step`.
  std::size_t bin_at(std::size_t step, std::int64_t rank) const noexcept {
    return step * static_cast<std::size_t>(ranks) + static_cast<std::size_t>(rank);
  }
  /// The graphs of bin b.
  std::vector<std::int64_t> bin(std::size_t b) const;
  /// What `rank` trains on this epoch: its batches in step order. Throws InputError for a rank
  /// outside [0, ranks).
  std::vector<std::vector<std::int64_t>> batches(std::int64_t rank) const;
};

/// Bins as an algorithm builds them (CSR, bins in step-major order). Empty bins are allowed.
/// add() appends to the bin being built; close() ends it (empty or not) and starts the next.
struct BinList {
  std::vector<std::int64_t> offsets{0};
  std::vector<std::int64_t> graphs;

  /// The number of closed bins.
  std::size_t size() const noexcept { return offsets.size() - 1; }
  void add(std::int64_t g) { graphs.push_back(g); }
  void close() { offsets.push_back(static_cast<std::int64_t>(graphs.size())); }
  /// One closed bin per graph of `gs`.
  void add_singletons(const std::vector<std::int64_t>& gs);
};

/// What an algorithm is given. make_plan has validated everything: sizes are non-negative,
/// `regular` holds the graphs that fit (size <= capacity) in ascending index order, and
/// `oversize` the others (non-empty only with allow_oversize); both together are all graphs.
struct PackInput {
  const std::vector<std::int64_t>& sizes;
  const PackParams& params;
  std::vector<std::int64_t> regular;
  std::vector<std::int64_t> oversize;
  std::int64_t regular_total = 0;  ///< sum of the regular graphs' sizes
  std::int64_t regular_max = 0;    ///< largest regular size (0 if none)
};

/// One packing algorithm.
class Packer {
 public:
  virtual ~Packer() = default;
  /// The name used by make_packer and the CLI, e.g. "ffd".
  virtual std::string name() const = 0;
  /// One line for --help.
  virtual std::string summary() const = 0;
  /// Every graph of `in` into bins, bins in step-major order. Oversize graphs must be placed
  /// as singletons; fewer than a multiple of W bins are padded with empty bins by make_plan.
  virtual BinList pack(const PackInput& in) const = 0;
};

/// The algorithms, in the order reports list them: iterative, balanced-pairs, fixed-count,
/// next-fit, ffd, fastmlip.
const std::vector<std::string>& packer_names();

/// Throws InputError naming the algorithm and listing the known ones.
std::unique_ptr<Packer> make_packer(const std::string& name);

/// Validates the inputs, packs, pads to a multiple of W, checks the rules and returns the plan.
/// \throws InputError for a non-positive capacity or ranks, a negative size (naming the graph),
///         or a graph larger than the capacity without allow_oversize (naming the graph, its size
///         and the capacity).
Plan make_plan(const Packer& packer, const std::vector<std::int64_t>& sizes, const PackParams& params);
Plan make_plan(const std::string& algorithm, const std::vector<std::int64_t>& sizes,
               const PackParams& params);

/// Checks the rules above for `plan` against `sizes`; throws Error (an internal error: the
/// algorithm broke a rule) describing the first violation. make_plan calls it on every plan.
void verify_plan(const Plan& plan, const std::vector<std::int64_t>& sizes, bool allow_oversize);

/// FNV-1a over ranks, capacity, the bin offsets and the graph order: equal hashes on two ranks
/// mean (with overwhelming probability) equal plans.
std::uint64_t plan_hash(const Plan& plan);

/// The trainer-facing view: fixed sizes, algorithm and parameters; plans per epoch.
class BatchSampler {
 public:
  BatchSampler(std::vector<std::int64_t> sizes, const std::string& algorithm, PackParams params);
  /// The whole plan of `epoch` (params.epoch is replaced).
  Plan plan(std::uint64_t epoch) const;
  /// `rank`'s batches for `epoch`, in step order; the same number on every rank.
  std::vector<std::vector<std::int64_t>> batches(std::int64_t rank, std::uint64_t epoch) const;

 private:
  std::vector<std::int64_t> m_sizes;
  std::unique_ptr<Packer> m_packer;
  PackParams m_params;
};

}  // namespace fastmlip::sampling
