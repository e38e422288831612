// SPDX-License-Identifier: MIT
#include "sampling/sampler.hpp"

#include <algorithm>
#include <limits>

#include "core/error.hpp"
#include "sampling/impl/packers.hpp"

namespace fastmlip::sampling {

std::vector<std::int64_t> Plan::bin(std::size_t b) const {
  if (b >= num_bins()) {
    throw InputError("Plan::bin: bin " + std::to_string(b) + " is out of range (the plan has " +
                     std::to_string(num_bins()) + " bins)");
  }
  return {graphs.begin() + offsets[b], graphs.begin() + offsets[b + 1]};
}

std::vector<std::vector<std::int64_t>> Plan::batches(std::int64_t rank) const {
  if (rank < 0 || rank >= ranks) {
    throw InputError("Plan::batches: rank " + std::to_string(rank) + " is outside 0.." +
                     std::to_string(ranks - 1) + "; the plan was made for " + std::to_string(ranks) +
                     " ranks");
  }
  std::vector<std::vector<std::int64_t>> out;
  out.reserve(steps());
  for (std::size_t s = 0; s < steps(); ++s) {
    out.push_back(bin(bin_at(s, rank)));
  }
  return out;
}

void BinList::add_singletons(const std::vector<std::int64_t>& gs) {
  for (std::int64_t g : gs) {
    add(g);
    close();
  }
}

namespace impl {

BinList bins_from_assignment(const std::vector<std::int64_t>& graphs_in_order,
                             const std::vector<std::int64_t>& bin_of_graph, std::int64_t nbins) {
  BinList out;
  out.offsets.assign(static_cast<std::size_t>(nbins) + 1, 0);
  for (std::int64_t g : graphs_in_order) {
    ++out.offsets[bin_of_graph[g] + 1];
  }
  for (std::int64_t b = 0; b < nbins; ++b) {
    out.offsets[b + 1] += out.offsets[b];
  }
  out.graphs.resize(graphs_in_order.size());
  std::vector<std::int64_t> fill(out.offsets.begin(), out.offsets.end() - 1);
  for (std::int64_t g : graphs_in_order) {
    out.graphs[fill[bin_of_graph[g]]++] = g;
  }
  return out;
}

}  // namespace impl

const std::vector<std::string>& packer_names() {
  static const std::vector<std::string> names = {"iterative", "balanced-pairs", "fixed-count", "next-fit",
                                                 "ffd",       "fastmlip"};
  return names;
}

std::unique_ptr<Packer> make_packer(const std::string& name) {
  if (name == "iterative") {
    return impl::make_iterative();
  }
  if (name == "balanced-pairs") {
    return impl::make_balanced_pairs();
  }
  if (name == "fixed-count") {
    return impl::make_fixed_count();
  }
  if (name == "next-fit") {
    return impl::make_next_fit();
  }
  if (name == "ffd") {
    return impl::make_ffd();
  }
  if (name == "fastmlip") {
    return impl::make_fastmlip();
  }
  std::string known;
  for (const auto& n : packer_names()) {
    known += (known.empty() ? "" : ", ") + n;
  }
  throw InputError("unknown packing algorithm '" + name + "'; known: " + known);
}

Plan make_plan(const Packer& packer, const std::vector<std::int64_t>& sizes, const PackParams& params) {
  const std::string fn = "make_plan(" + packer.name() + ")";
  if (params.capacity <= 0) {
    throw InputError(fn + ": the capacity must be a positive number of size units, got " +
                     std::to_string(params.capacity));
  }
  if (params.ranks <= 0) {
    throw InputError(fn + ": the number of ranks must be at least 1, got " + std::to_string(params.ranks));
  }
  if (params.graphs_per_batch < 0) {
    throw InputError(fn + ": graphs per batch must be 0 (automatic) or positive, got " +
                     std::to_string(params.graphs_per_batch));
  }
  if (!(params.tie_tolerance >= 0.0 && params.tie_tolerance < 1.0)) {
    throw InputError(fn + ": the tie tolerance must be in [0, 1), got " +
                     std::to_string(params.tie_tolerance));
  }
  if (params.swap_passes < 0) {
    throw InputError(fn + ": swap passes must be >= 0, got " + std::to_string(params.swap_passes));
  }
  PackInput in{sizes, params, {}, {}, 0, 0};
  in.regular.reserve(sizes.size());
  for (std::size_t g = 0; g < sizes.size(); ++g) {
    const std::int64_t s = sizes[g];
    if (s < 0) {
      throw InputError(fn + ": graph " + std::to_string(g) + " (0-based) has a negative size " +
                       std::to_string(s) + "; sizes count atoms, edges or angles and must be >= 0");
    }
    if (s > params.capacity) {
      if (!params.allow_oversize) {
        throw InputError(fn + ": graph " + std::to_string(g) + " (0-based) has size " + std::to_string(s) +
                         ", more than the capacity " + std::to_string(params.capacity) +
                         "; raise the capacity, or allow oversize graphs to give each a bin of its own");
      }
      in.oversize.push_back(static_cast<std::int64_t>(g));
      continue;
    }
    if (in.regular_total > std::numeric_limits<std::int64_t>::max() - s) {
      throw InputError(fn + ": the sizes sum to more than 2^63; use a smaller size measure");
    }
    in.regular.push_back(static_cast<std::int64_t>(g));
    in.regular_total += s;
    in.regular_max = std::max(in.regular_max, s);
  }

  BinList bins = packer.pack(in);
  if (bins.offsets.empty() || bins.offsets.back() != static_cast<std::int64_t>(bins.graphs.size())) {
    throw Error(fn + ": internal error: the last bin was not closed");
  }
  const std::size_t w = static_cast<std::size_t>(params.ranks);
  while (bins.size() % w != 0) {
    bins.close();
  }
  Plan plan;
  plan.algorithm = packer.name();
  plan.ranks = params.ranks;
  plan.capacity = params.capacity;
  plan.epoch = params.epoch;
  plan.offsets = std::move(bins.offsets);
  plan.graphs = std::move(bins.graphs);
  // The rules, checked in the same pass that sums the loads (verify_plan does the same for
  // plans built elsewhere): a broken rule here is a bug in the algorithm, not bad input.
  const std::string bug = fn + ": internal error: ";
  if (plan.graphs.size() != sizes.size()) {
    throw Error(bug + "the plan holds " + std::to_string(plan.graphs.size()) + " graphs, the input " +
                std::to_string(sizes.size()));
  }
  std::vector<char> seen(sizes.size(), 0);
  plan.loads.assign(plan.offsets.size() - 1, 0);
  for (std::size_t b = 0; b + 1 < plan.offsets.size(); ++b) {
    for (std::int64_t k = plan.offsets[b]; k < plan.offsets[b + 1]; ++k) {
      const std::int64_t g = plan.graphs[k];
      if (g < 0 || static_cast<std::size_t>(g) >= sizes.size() || seen[g]) {
        throw Error(bug + "graph " + std::to_string(g) + " is out of range or in two bins (bin " +
                    std::to_string(b) + ")");
      }
      seen[g] = 1;
      plan.loads[b] += sizes[g];
    }
    if (plan.loads[b] > params.capacity && plan.offsets[b + 1] - plan.offsets[b] != 1) {
      throw Error(bug + "bin " + std::to_string(b) + " has load " + std::to_string(plan.loads[b]) +
                  " over the capacity " + std::to_string(params.capacity));
    }
  }
  return plan;
}

Plan make_plan(const std::string& algorithm, const std::vector<std::int64_t>& sizes,
               const PackParams& params) {
  return make_plan(*make_packer(algorithm), sizes, params);
}

void verify_plan(const Plan& plan, const std::vector<std::int64_t>& sizes, bool allow_oversize) {
  const std::string fn = "verify_plan(" + plan.algorithm + "): internal error: ";
  if (plan.ranks <= 0 || plan.num_bins() % static_cast<std::size_t>(plan.ranks) != 0) {
    throw Error(fn + std::to_string(plan.num_bins()) + " bins is not a multiple of " +
                std::to_string(plan.ranks) + " ranks");
  }
  if (plan.offsets.size() != plan.num_bins() + 1 || plan.offsets.front() != 0 ||
      plan.offsets.back() != static_cast<std::int64_t>(plan.graphs.size())) {
    throw Error(fn + "bin offsets are inconsistent");
  }
  if (plan.graphs.size() != sizes.size()) {
    throw Error(fn + "the plan holds " + std::to_string(plan.graphs.size()) + " graphs, the input " +
                std::to_string(sizes.size()));
  }
  std::vector<char> seen(sizes.size(), 0);
  for (std::size_t b = 0; b < plan.num_bins(); ++b) {
    if (plan.offsets[b + 1] < plan.offsets[b]) {
      throw Error(fn + "bin offsets decrease at bin " + std::to_string(b));
    }
    std::int64_t load = 0;
    for (std::int64_t k = plan.offsets[b]; k < plan.offsets[b + 1]; ++k) {
      const std::int64_t g = plan.graphs[k];
      if (g < 0 || static_cast<std::size_t>(g) >= sizes.size() || seen[g]) {
        throw Error(fn + "graph " + std::to_string(g) + " is out of range or in two bins (bin " +
                    std::to_string(b) + ")");
      }
      seen[g] = 1;
      load += sizes[g];
    }
    if (load != plan.loads[b]) {
      throw Error(fn + "bin " + std::to_string(b) + " has a wrong load");
    }
    const std::int64_t count = plan.offsets[b + 1] - plan.offsets[b];
    if (load > plan.capacity && !(allow_oversize && count == 1)) {
      throw Error(fn + "bin " + std::to_string(b) + " has load " + std::to_string(load) +
                  " over the capacity " + std::to_string(plan.capacity));
    }
  }
}

std::uint64_t plan_hash(const Plan& plan) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  auto mix = [&h](std::uint64_t v) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (v >> (8 * byte)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  };
  mix(static_cast<std::uint64_t>(plan.ranks));
  mix(static_cast<std::uint64_t>(plan.capacity));
  mix(plan.offsets.size());
  for (std::int64_t o : plan.offsets) {
    mix(static_cast<std::uint64_t>(o));
  }
  for (std::int64_t g : plan.graphs) {
    mix(static_cast<std::uint64_t>(g));
  }
  return h;
}

BatchSampler::BatchSampler(std::vector<std::int64_t> sizes, const std::string& algorithm, PackParams params)
    : m_sizes(std::move(sizes)), m_packer(make_packer(algorithm)), m_params(params) {}

Plan BatchSampler::plan(std::uint64_t epoch) const {
  PackParams p = m_params;
  p.epoch = epoch;
  return make_plan(*m_packer, m_sizes, p);
}

std::vector<std::vector<std::int64_t>> BatchSampler::batches(std::int64_t rank, std::uint64_t epoch) const {
  return plan(epoch).batches(rank);
}

}  // namespace fastmlip::sampling
