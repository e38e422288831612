// SPDX-License-Identifier: MIT
// Pack time of every algorithm on the MACE paper's Table 3 (2,650,823 graphs, capacity 3072
// atoms) for W = 16, 64 and 740, plus the cost of the randomness metric and of counting graph
// sizes. Quality figures ride along as counters. The side-by-side table for benchmarks/README.md
// comes from run_pack_benchmarks.sh (fastmlip-pack --json, medians of repeated runs).
#include <benchmark/benchmark.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/neighbor_list.hpp"
#include "sampling/graph_sizes.hpp"
#include "sampling/metrics.hpp"
#include "core/rng.hpp"
#include "sampling/sampler.hpp"

namespace {

namespace sp = fastmlip::sampling;

const std::vector<std::int64_t>& table3() {
  static const std::vector<std::int64_t> sizes =
      sp::packing_sizes(sp::synthetic_sizes("table3", 0), sp::SizeMeasure::parse("atoms"));
  return sizes;
}

void BM_Pack(benchmark::State& state) {
  const std::string algorithm = sp::packer_names()[static_cast<std::size_t>(state.range(0))];
  const auto packer = sp::make_packer(algorithm);
  const auto& sizes = table3();
  sp::PackParams p;
  p.capacity = 3072;
  p.ranks = state.range(1);
  sp::PlanMetrics m;
  for (auto _ : state) {
    sp::Plan plan = sp::make_plan(*packer, sizes, p);
    benchmark::DoNotOptimize(plan.graphs.data());
    state.PauseTiming();
    m = sp::measure_plan(plan);
    ++p.epoch;  // a fresh plan each time, as in training
    state.ResumeTiming();
  }
  state.SetLabel(algorithm);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(sizes.size()));
  state.counters["padding"] = m.padding_fraction;
  state.counters["max_over_mean"] = m.load_max_over_mean;
  state.counters["load_cv"] = m.load_cv;
  state.counters["steps"] = static_cast<double>(m.steps);
}
BENCHMARK(BM_Pack)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {16, 64, 740}})
    ->ArgNames({"algorithm", "W"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_EpochOverlap(benchmark::State& state) {
  const auto& sizes = table3();
  sp::PackParams p;
  p.ranks = 64;
  const sp::Plan a = sp::make_plan("fastmlip", sizes, p);
  p.epoch = 1;
  const sp::Plan b = sp::make_plan("fastmlip", sizes, p);
  for (auto _ : state) {
    benchmark::DoNotOptimize(sp::epoch_overlap(a, b));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(sizes.size()));
}
BENCHMARK(BM_EpochOverlap)->Unit(benchmark::kMillisecond)->UseRealTime();

// Edges and angles of a periodic box at liquid-water-like density (0.1 atoms/A^3), cutoff 5 A,
// bond cutoff 3 A: the per-frame cost of fastmlip-pack --extxyz. Linear in the atom count.
void BM_CountGraph(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const double side = std::cbrt(static_cast<double>(n) / 0.1);
  const std::array<double, 9> cell{side, 0, 0, 0, side, 0, 0, 0, side};
  fastmlip::Rng rng(3);
  std::vector<double> pos(3 * static_cast<std::size_t>(n));
  for (double& x : pos) {
    x = side * rng.uniform();
  }
  std::int64_t edges = 0;
  for (auto _ : state) {
    edges = fastmlip::graph::count_graph(pos.data(), static_cast<std::size_t>(n), cell.data(),
                                         {true, true, true}, 5.0, 3.0)
                .edges;
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["edges_per_atom"] = static_cast<double>(edges) / static_cast<double>(n);
}
BENCHMARK(BM_CountGraph)->Arg(768)->Arg(6144)->Arg(49152)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
