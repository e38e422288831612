// SPDX-License-Identifier: MIT
// The whole MACE model (energies and dE/dv, the pair styles' call) on Kokkos' default execution
// space: the host in the default build, the GPU in the device path's (the kokkos-cuda preset,
// run by scripts/gpu-check.sh). Models: the committed MACE-MP-0 small and medium shapes
// (tests/reference/data/mace/mp_{small,medium}), and a large shape written here with the same
// hyperparameters but hidden irreps 128x0e+128x1o+128x2e (mp_large: the layout writer's file,
// weights drawn from a fixed normal stream, which the time does not depend on; not committed, to
// keep the tree small); structures: random fcc Cu50Ni50 (a = 3.568 A, rattled 0.05 A, about 78
// edges per atom within 6 A), as benchmarks/mace-lammps uses, at 864 and 10976 atoms, and on a
// GPU also 97556 (29^3 cells). The graph is built on the host and moved once to where the model runs; each
// timed step is one compute(), including the copy of dE/dv and the per-atom energies back to
// the host that a host LAMMPS needs. The peers on the same GPU: peers_mace_gpu.py.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "graph/atom_graph.hpp"
#include "graph/graph_mirror.hpp"
#include "graph/neighbor_list.hpp"
#include "io/potential_file.hpp"
#include "kernels/backend.hpp"
#include "model_bench.hpp"
#include "models/mace/mace_layout.hpp"
#include "models/mace/mace_model.hpp"

namespace {

using namespace fastmlip;
using Exec = Kokkos::DefaultExecutionSpace;

struct HostGraph {
  int n = 0;
  std::vector<int> species, center, neighbor, start;
  std::vector<double> vectors;
};

// fcc Cu50Ni50 of cells^3 conventional cells, every image folded into the edge vectors.
HostGraph fcc_cuni(int cells, const models::MaceModel<Exec, double>& m) {
  const double a = 3.568;
  const double basis[4][3] = {{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}};
  std::vector<double> pos;
  std::mt19937_64 g(20261123u + static_cast<unsigned>(cells));
  std::normal_distribution<double> rattle(0.0, 0.05);
  for (int i = 0; i < cells; ++i) {
    for (int j = 0; j < cells; ++j) {
      for (int k = 0; k < cells; ++k) {
        for (const auto& b : basis) {
          pos.push_back(a * (i + b[0]) + rattle(g));
          pos.push_back(a * (j + b[1]) + rattle(g));
          pos.push_back(a * (k + b[2]) + rattle(g));
        }
      }
    }
  }
  HostGraph h;
  h.n = static_cast<int>(pos.size() / 3);
  const int cu = m.species_index(29), ni = m.species_index(28);
  for (int i = 0; i < h.n; ++i) {
    h.species.push_back(i % 2 == 0 ? cu : ni);
  }
  std::shuffle(h.species.begin(), h.species.end(), g);
  const double L = a * cells;
  graph::NeighborListOptions opt;
  opt.cutoff = m.cutoff();
  const auto nl = graph::build_neighbor_list(pos, std::array<double, 9>{L, 0, 0, 0, L, 0, 0, 0, L},
                                             {true, true, true}, opt);
  const auto centers = nl.centers();
  h.center.assign(centers.begin(), centers.end());
  h.neighbor.assign(nl.neighbors.begin(), nl.neighbors.end());
  h.vectors = nl.vectors;
  h.start = graph::center_offsets(h.n, h.center);
  return h;
}

// The MP-0 shapes' hyperparameters (2 interactions, l_max 3, correlation 3, r_max 6, 10 Bessel
// functions, radial MLP [64, 64, 64], ScaleShiftMACE, Cu and Ni) with hidden irreps up to L = 2.
io::PotentialFile mp_large() {
  models::mace::MaceLayout c;
  c.atomic_numbers = {28, 29};
  c.r_max = 6.0;
  c.num_bessel = 10;
  c.num_polynomial_cutoff = 5;
  c.max_ell = 3;
  c.num_channels = 128;
  c.max_L = 2;
  c.correlation = {3};
  c.num_interactions = 2;
  c.radial_mlp = {64, 64, 64};
  c.mlp_irreps = 16;
  c.avg_num_neighbors = 61.96;
  models::mace::MaceLayoutValues v;
  v.atomic_energies = {-5.5517, -3.7152};
  v.scale = {0.8043};
  v.shift = {0.1647};
  v.provenance = {{"writer", "bench_mace_model mp_large"}};
  std::mt19937_64 g(20261126u);
  return models::mace::write_mace_layout(c, v, [&](const std::string&, std::int64_t n, double scale) {
    std::normal_distribution<double> d(0.0, scale);
    std::vector<double> w(static_cast<std::size_t>(n));
    for (double& x : w) {
      x = d(g);
    }
    return w;
  });
}

io::PotentialFile potential(const std::string& model) {
  if (model == "mp_large") {
    return mp_large();
  }
  return io::read_potential_file(std::string(FASTMLIP_REFERENCE_DATA_DIR) + "/mace/" + model +
                                 ".safetensors");
}

// edge_chunk: MaceOptions::edge_chunk (0: automatic; INT_MAX: every layer's radial weights for
// all edges at once, as before chunking, for the comparison).
template <class T>
void BM_MaceModel(benchmark::State& state, const std::string& model, int cells, kernels::Backend backend,
                  int edge_chunk, kernels::Backend radial_backend) {
  const auto pot = potential(model);
  const models::MaceModel<Exec, double> probe(pot, {});
  const HostGraph h = fcc_cuni(cells, probe);
  std::vector<T> vec(h.vectors.begin(), h.vectors.end());
  const auto host = graph::host_graph<T>(h.n, h.n, h.species.data(), static_cast<int>(h.center.size()),
                                         h.center.data(), h.neighbor.data(), h.start.data(), vec.data());
  const std::size_t before = bench::device_used_bytes();
  graph::GraphMirror<T, typename Exec::memory_space> mirror;
  const auto g = mirror.of(host);
  models::MaceOptions opt;
  opt.backend = backend;
  opt.edge_chunk = edge_chunk;
  opt.radial_backend = radial_backend;
  models::MaceModel<Exec, T> m(pot, opt);
  models::MaceResult<T> r;
  m.compute(g, nullptr, true, r);  // warm-up: buffers grow to this graph once
  Exec().fence();
  const std::size_t after = bench::device_used_bytes();
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    m.compute(g, nullptr, true, r);
    Exec().fence();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    benchmark::DoNotOptimize(r.energy);
  }
  state.counters["atoms"] = h.n;
  state.counters["edges"] = static_cast<double>(h.center.size());
  state.counters["atom_steps_per_s"] = benchmark::Counter(h.n, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["device_bytes_per_atom"] = after > before ? static_cast<double>(after - before) / h.n : 0.0;
  state.SetLabel(std::string(Exec::name()) + " " + model);
}

// Each case on the Kokkos path (the default backend) and, where CUDA runs, on the hand-written
// CUDA kernels behind the same entry points (names ending in /cuda_kernels), and with the radial
// MLP's layers as cuBLAS GEMMs too where the build found cuBLAS (/cuda_kernels_cublas).
const bool registered = [] {
  struct Variant {
    kernels::Backend backend;
    int edge_chunk;
    std::string tag;
    kernels::Backend radial = kernels::Backend::kokkos;
  };
  std::vector<Variant> backends = {{kernels::Backend::kokkos, 0, ""}};
#if defined(KOKKOS_ENABLE_CUDA)
  backends.push_back({kernels::Backend::cuda, 0, "/cuda_kernels"});
#if defined(FASTMLIP_HAVE_CUBLAS)
  backends.push_back({kernels::Backend::cuda, 0, "/cuda_kernels_cublas", kernels::Backend::cuda});
#endif
#else
  // On the host, also without edge chunks (MaceOptions::edge_chunk): its time and memory
  // against the chunked default (benchmarks/README.md, peak RSS per case).
  backends.push_back({kernels::Backend::kokkos, std::numeric_limits<int>::max(), "/unchunked"});
#endif
  // 97556 atoms only where a GPU runs the model: on a host core one step takes minutes.
  std::vector<int> sizes = {6, 14};
#if defined(KOKKOS_ENABLE_CUDA)
  sizes.push_back(29);
#endif
  for (const char* model : {"mp_small", "mp_medium", "mp_large"}) {
    for (const int cells : sizes) {
      for (const auto& [backend, edge_chunk, tag, radial] : backends) {
        const std::string suffix = std::string(model) + "/" + std::to_string(4 * cells * cells * cells) + tag;
        benchmark::RegisterBenchmark(("BM_MaceModel/float/" + suffix).c_str(), BM_MaceModel<float>, model,
                                     cells, backend, edge_chunk, radial)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(("BM_MaceModel/double/" + suffix).c_str(), BM_MaceModel<double>, model,
                                     cells, backend, edge_chunk, radial)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return fastmlip::bench::run_benchmarks(argc, argv); }
