// SPDX-License-Identifier: MIT
#include "sampling/metrics.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace fastmlip::sampling {

PlanMetrics measure_plan(const Plan& plan) {
  PlanMetrics m;
  m.graphs = static_cast<std::int64_t>(plan.num_graphs());
  m.bins = static_cast<std::int64_t>(plan.num_bins());
  m.steps = static_cast<std::int64_t>(plan.steps());
  if (m.bins == 0) {
    return m;
  }
  // Sums in long double: 10^5 bins of 10^5 tokens squared is 10^15 per term, where the
  // variance of well-balanced loads is a small difference of large numbers.
  long double total = 0, sq = 0, sum_max = 0;
  const std::size_t w = static_cast<std::size_t>(plan.ranks);
  for (std::size_t t = 0; t < plan.steps(); ++t) {
    std::int64_t mx = 0;
    for (std::size_t r = 0; r < w; ++r) {
      const std::int64_t l = plan.loads[t * w + r];
      mx = std::max(mx, l);
      total += l;
      sq += static_cast<long double>(l) * l;
    }
    sum_max += mx;
  }
  const long double bins = static_cast<long double>(m.bins);
  m.padding_fraction = static_cast<double>(1.0L - total / (bins * static_cast<long double>(plan.capacity)));
  if (total > 0) {
    m.load_max_over_mean = static_cast<double>(sum_max / (total / static_cast<long double>(w)));
    const long double mean = total / bins;
    const long double var = std::max<long double>(0, sq / bins - mean * mean);
    m.load_cv = static_cast<double>(std::sqrt(var) / mean);
  }
  return m;
}

double epoch_overlap(const Plan& first, const Plan& second) {
  const std::size_t n = first.num_graphs();
  if (second.num_graphs() != n) {
    throw InputError("epoch_overlap: the plans cover " + std::to_string(n) + " and " +
                     std::to_string(second.num_graphs()) + " graphs; compare plans of the same dataset");
  }
  std::vector<std::int64_t> bin_in_second(n, -1);
  for (std::size_t b = 0; b < second.num_bins(); ++b) {
    for (std::int64_t k = second.offsets[b]; k < second.offsets[b + 1]; ++k) {
      const std::int64_t g = second.graphs[k];
      if (g < 0 || static_cast<std::size_t>(g) >= n) {
        throw InputError("epoch_overlap: graph index " + std::to_string(g) + " is out of range");
      }
      bin_in_second[g] = static_cast<std::int64_t>(b);
    }
  }
  long double pairs = 0, shared = 0;
  std::vector<std::int64_t> ids;
  for (std::size_t b = 0; b < first.num_bins(); ++b) {
    const std::int64_t m = first.offsets[b + 1] - first.offsets[b];
    pairs += static_cast<long double>(m) * (m - 1) / 2;
    ids.clear();
    for (std::int64_t k = first.offsets[b]; k < first.offsets[b + 1]; ++k) {
      const std::int64_t g = first.graphs[k];
      if (g < 0 || static_cast<std::size_t>(g) >= n || bin_in_second[g] < 0) {
        throw InputError("epoch_overlap: graph " + std::to_string(g) +
                         " of the first plan is not in the second");
      }
      ids.push_back(bin_in_second[g]);
    }
    std::sort(ids.begin(), ids.end());
    for (std::size_t i = 0; i < ids.size();) {
      std::size_t j = i;
      while (j < ids.size() && ids[j] == ids[i]) {
        ++j;
      }
      const long double c = static_cast<long double>(j - i);
      shared += c * (c - 1) / 2;
      i = j;
    }
  }
  return pairs > 0 ? static_cast<double>(shared / pairs) : 0.0;
}

double epoch_overlap_random(const Plan& second) {
  const long double n = static_cast<long double>(second.num_graphs());
  if (n < 2) {
    return 0.0;
  }
  long double s = 0;
  for (std::size_t b = 0; b < second.num_bins(); ++b) {
    const long double m = static_cast<long double>(second.offsets[b + 1] - second.offsets[b]);
    s += m * (m - 1);
  }
  return static_cast<double>(s / (n * (n - 1)));
}

}  // namespace fastmlip::sampling
