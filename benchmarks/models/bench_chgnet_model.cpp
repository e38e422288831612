// SPDX-License-Identifier: MIT
// The CHGNet 0.3.0 model on Kokkos' default execution space (the GPU in a Kokkos-CUDA build,
// scripts/gpu-check.sh's chgnet_bench step): one compute() with gradients, i.e. energies,
// magnetic moments and dE/d(edge vectors), from which forces and stress are sums, on rattled
// LiMnO2 supercells of about 1,000 and 10,000 atoms, and on a GPU also 100,000 and 1,000,000
// (issue 20's goal: a million atoms on one 80 GB GPU). The graph is built once on the host and
// mirrored to the model's memory before timing, as a neighbour list lives for several MD steps;
// the results stay in the model's memory (ChgnetDeviceResult, what the /kk styles tally from).
//
// Counters: atoms, edges (atom graph), atom_steps_per_s; device_bytes_per_atom (the GPU's used
// memory after the first step minus before the graph was mirrored: the graph and the model's
// working storage; 0 on the host) and kokkos_peak_bytes_per_atom (the peak of live Kokkos allocations
// over the same span, on any backend, so a CPU run of the /teams path, which is the GPU's code,
// predicts the GPU's working storage), with a line naming the largest allocations at that peak.
// A case that runs out of memory reports the error, so the largest cell that fits is the
// largest case without one.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "io/potential_file.hpp"
#include "kernels/dense_path.hpp"
#include "model_bench.hpp"
#include "models/chgnet/chgnet_model.hpp"

namespace {

using namespace fastmlip;
using Exec = Kokkos::DefaultExecutionSpace;

// Live and peak bytes of Kokkos allocations, from the Kokkos Tools callbacks, and the live
// allocations by label at the peak: where the memory goes (printed per case). Allocations
// happen in the warm-up step (grow-only working storage), a few hundred, so the copy at each
// new peak is cheap.
struct Allocation {
  std::string label;
  std::int64_t bytes;
};
std::int64_t g_live = 0, g_peak = 0;
std::map<const void*, Allocation> g_allocations, g_at_peak;
void on_allocate(Kokkos::Tools::SpaceHandle, const char* label, const void* ptr, std::uint64_t size) {
  g_live += static_cast<std::int64_t>(size);
  g_allocations[ptr] = {label, static_cast<std::int64_t>(size)};
  if (g_live > g_peak) {
    g_peak = g_live;
    g_at_peak = g_allocations;
  }
}
void on_deallocate(Kokkos::Tools::SpaceHandle, const char*, const void* ptr, std::uint64_t size) {
  g_live -= static_cast<std::int64_t>(size);
  g_allocations.erase(ptr);
}
void track_allocations(bool on) {
  g_live = g_peak = 0;
  g_allocations.clear();
  if (on) {
    g_at_peak.clear();
  }
  Kokkos::Tools::Experimental::set_allocate_data_callback(on ? on_allocate : nullptr);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(on ? on_deallocate : nullptr);
}
/// The largest labels live at the peak, bytes per atom, one line.
std::string peak_breakdown(int atoms) {
  std::map<std::string, std::int64_t> by_label;
  for (const auto& [ptr, a] : g_at_peak) {
    by_label[a.label] += a.bytes;
  }
  std::vector<std::pair<std::int64_t, std::string>> order;
  for (const auto& [label, bytes] : by_label) {
    order.emplace_back(bytes, label);
  }
  std::sort(order.rbegin(), order.rend());
  std::string out;
  for (std::size_t i = 0; i < order.size() && i < 10; ++i) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s%s %.1f KB", i ? ", " : "", order[i].second.c_str(),
                  static_cast<double>(order[i].first) / atoms / 1e3);
    out += buf;
  }
  return out;
}

/// LiMnO2 (Pmmn, 8 atoms, examples/limno2/limno2.data) repeated n[0] x n[1] x n[2] times, every
/// atom displaced by a normal 0.03 A in each direction (a fixed seed per size).
struct Supercell {
  std::array<double, 9> lattice{};
  std::vector<double> positions;
  std::vector<int> numbers;
};
Supercell limno2(const std::array<int, 3>& n) {
  const double a = 2.86, b = 4.58, c = 5.76;
  struct Site {
    int z;
    double f[3];
  };
  const Site cell[8] = {{3, {0.5, 0.5, 0.38}},   {3, {0.0, 0.0, 0.62}},  {25, {0.5, 0.5, 0.863}},
                        {25, {0.0, 0.0, 0.137}}, {8, {0.5, 0.0, 0.361}}, {8, {0.0, 0.5, 0.639}},
                        {8, {0.5, 0.0, 0.903}},  {8, {0.0, 0.5, 0.097}}};
  Supercell s;
  s.lattice = {a * n[0], 0, 0, 0, b * n[1], 0, 0, 0, c * n[2]};
  std::mt19937_64 g(20261202u + static_cast<unsigned>(n[0] * n[1] * n[2]));
  std::normal_distribution<double> rattle(0.0, 0.03);
  for (int i = 0; i < n[0]; ++i) {
    for (int j = 0; j < n[1]; ++j) {
      for (int k = 0; k < n[2]; ++k) {
        for (const Site& site : cell) {
          s.numbers.push_back(site.z);
          s.positions.push_back(a * (i + site.f[0]) + rattle(g));
          s.positions.push_back(b * (j + site.f[1]) + rattle(g));
          s.positions.push_back(c * (k + site.f[2]) + rattle(g));
        }
      }
    }
  }
  return s;
}

/// Repetitions giving about `atoms` atoms in a box of roughly equal sides.
std::array<int, 3> repetitions(double atoms) {
  const double side = std::cbrt(atoms / 8.0 * 2.86 * 4.58 * 5.76);
  return {std::max(1, static_cast<int>(std::lround(side / 2.86))),
          std::max(1, static_cast<int>(std::lround(side / 4.58))),
          std::max(1, static_cast<int>(std::lround(side / 5.76)))};
}

io::PotentialFile potential() {
  return io::read_potential_file(std::string(FASTMLIP_SOURCE_DIR) + "/potentials/chgnet-0.3.0.safetensors");
}

template <class T>
void BM_ChgnetModel(benchmark::State& state, std::array<int, 3> reps, kernels::DensePath path) {
  try {
    const Supercell s = limno2(reps);
    const int n = static_cast<int>(s.numbers.size());
    models::ChgnetModel<Exec, T> model(potential(), path);
    const auto host = models::make_structure_graph<T>(
        s.positions, s.numbers, s.lattice.data(), {true, true, true}, model.cutoff(), model.bond_cutoff());
    const std::size_t before = bench::device_used_bytes();
    track_allocations(true);
    models::ChgnetGraphMirror<T, typename Exec::memory_space> mirror;
    const auto g = mirror.of(host.view());
    models::ChgnetDeviceResult<typename Exec::memory_space> r;
    model.compute(g, nullptr, true, r);  // warm-up: working storage grows to this graph once
    Exec().fence();
    const std::size_t after = bench::device_used_bytes();
    for (auto _ : state) {
      const auto t0 = std::chrono::steady_clock::now();
      model.compute(g, nullptr, true, r);
      Exec().fence();
      state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      benchmark::DoNotOptimize(r.energy);
    }
    const std::int64_t peak = g_peak;
    track_allocations(false);
    std::printf("%s %s, %d atoms: at the peak of Kokkos allocations (%.1f KB per atom): %s\n", Exec::name(),
                sizeof(T) == 4 ? "float32" : "float64", n, static_cast<double>(peak) / n / 1e3,
                peak_breakdown(n).c_str());
    state.counters["atoms"] = n;
    state.counters["edges"] = static_cast<double>(host.center.size());
    state.counters["atom_steps_per_s"] = benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["device_bytes_per_atom"] = after > before ? static_cast<double>(after - before) / n : 0.0;
    state.counters["kokkos_peak_bytes_per_atom"] = static_cast<double>(peak) / n;
    state.SetLabel(std::string(Exec::name()) + " LiMnO2 " + std::to_string(reps[0]) + "x" +
                   std::to_string(reps[1]) + "x" + std::to_string(reps[2]));
  } catch (const std::exception& e) {
    // Out of memory (the model's ResourceError names the allocation; the graph's mirror throws
    // Kokkos' own error) or anything else refused: the case reports it, the others still run.
    track_allocations(false);
    state.SkipWithError(e.what());
  }
}

// float32 (the checkpoint's own precision, chgnet's) and float64; a million atoms in float32
// only (float64 would take twice the memory of float32, which is the question there). On the
// host also the `teams` path (names ending in /teams), the code a GPU runs, for its memory figure,
// at the smallest size only: on a CPU core it takes minutes a step.
const bool registered = [] {
  std::vector<double> sizes = {1000, 10000};
#if defined(KOKKOS_ENABLE_CUDA)
  sizes.push_back(100000);
  sizes.push_back(1000000);
#endif
  for (const double atoms : sizes) {
    const auto reps = repetitions(atoms);
    const std::string n = std::to_string(8 * reps[0] * reps[1] * reps[2]);
    std::vector<std::pair<kernels::DensePath, std::string>> paths = {{kernels::DensePath::automatic, ""}};
#if !defined(KOKKOS_ENABLE_CUDA)
    if (atoms == sizes.front()) {
      paths.push_back({kernels::DensePath::teams, "/teams"});
    }
#endif
    for (const auto& [path, tag] : paths) {
      benchmark::RegisterBenchmark(("BM_ChgnetModel/float/" + n + tag).c_str(), BM_ChgnetModel<float>, reps,
                                   path)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
      if (atoms < 1000000) {
        benchmark::RegisterBenchmark(("BM_ChgnetModel/double/" + n + tag).c_str(), BM_ChgnetModel<double>,
                                     reps, path)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return fastmlip::bench::run_benchmarks(argc, argv); }
