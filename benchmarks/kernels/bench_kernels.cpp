// SPDX-License-Identifier: MIT
// Kernel benchmarks at MACE-MP shapes: 128 channels, spherical harmonics up to l = 3,
// correlation 3, 8 Bessel functions, radial MLP [64, 64, 64], 10 elements. The naive reference
// kernels run in the same binary for the fused/naive ratio. Peers: run_kernel_benchmarks.sh.
#include <benchmark/benchmark.h>

#include <Kokkos_Core.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "../../tests/common/kernel_fixtures.hpp"
#include "kernels/channelwise_tp_kokkos.hpp"
#include "kernels/radial_mlp_kokkos.hpp"
#include "kernels/reference/channelwise_tp_ref.hpp"
#include "kernels/reference/symmetric_contraction_ref.hpp"
#include "kernels/symmetric_contraction_kokkos.hpp"

namespace {

using namespace fastmlip;
using namespace fastmlip::kernels;
using Exec = Kokkos::DefaultHostExecutionSpace;
using Matrix = Kokkos::View<double**, Kokkos::LayoutRight, Exec>;
constexpr int kChannels = 128, kElements = 10;

Irreps hidden(const char* which) {
  if (std::string(which) == "small") {
    return Irreps::parse("128x0e");
  }
  if (std::string(which) == "large") {
    return Irreps::parse("128x0e+128x1o+128x2e");
  }
  return Irreps::parse("128x0e+128x1o");
}

Irreps interaction_target() { return Irreps::parse("128x0e+128x1o+128x2e+128x3o"); }

void fill(Matrix m, unsigned seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  for (std::size_t i = 0; i < m.size(); ++i) {
    m.data()[i] = d(g);
  }
}

struct Graph {
  std::vector<int> sender, receiver;
};
Graph graph(int nodes, int neighbours) {
  std::mt19937_64 g(7);
  Graph out;
  for (int n = 0; n < nodes; ++n) {
    for (int k = 0; k < neighbours; ++k) {
      out.receiver.push_back(n);
      out.sender.push_back(static_cast<int>(g() % nodes));
    }
  }
  return out;
}

// Channelwise TP fused with gather/scatter: args {nodes, neighbours, shape 0/1/2}.
void BM_ChannelwiseTP(benchmark::State& state, const char* shape, bool naive) {
  const int N = static_cast<int>(state.range(0)), K = static_cast<int>(state.range(1));
  const auto tp = ChannelwiseTP::mace(hidden(shape), Irreps::spherical_harmonics(3), interaction_target());
  const auto gr = graph(N, K);
  const int E = N * K;
  Matrix x("x", N, tp.dim1()), Y("Y", E, tp.dim2()), w("w", E, tp.weight_numel), out("out", N, tp.dim_out());
  fill(x, 1);
  fill(Y, 2);
  fill(w, 3);
  const ChannelwiseTPKokkos<Exec, double> k(tp);
  const auto g = EdgeIndex<Exec>::build(N, gr.sender, gr.receiver);
  for (auto _ : state) {
    if (naive) {
      reference::compute_channelwise_tp(tp, N, E, gr.sender.data(), gr.receiver.data(), x.data(), Y.data(), w.data(),
                                        out.data());
    } else {
      k.compute(g, x, Y, w, out);
    }
    benchmark::DoNotOptimize(out.data());
  }
  long long flops = 0;  // 3 multiplies + 1 add per CG non-zero per channel per edge
  for (const auto& ins : tp.instructions) {
    flops += 4LL * ins.mul * (ins.cg_end - ins.cg_begin);
  }
  state.counters["edges/s"] = benchmark::Counter(static_cast<double>(E), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(1e-9 * flops * E, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["message_bytes_per_edge"] = 0;  // the per-edge message tensor is never stored
}

struct ScData {
  SymmetricContraction sc;
  std::vector<std::vector<std::vector<double>>> U, W;
};

// MACE-MP medium product: 128x(0e+1o+2e+3o) -> 128x(0e+1o), correlation 3. mace-torch's U
// depends on the irreps only, so the 2-channel test fixture holds exactly the U needed here.
ScData sc_data() {
  const auto data = test::load_kernel_fixture(FASTMLIP_REFERENCE_DATA_DIR, "symmetric_contraction.json");
  auto mace = test::mace_contraction_data(data["symmetric_contraction"][2]);
  ScData d;
  d.U = std::move(mace.U);
  const auto& shapes = mace.u_shapes;
  d.sc = SymmetricContraction::from_mace(interaction_target(), Irreps::parse("128x0e+128x1o"), 3, d.U, shapes);
  std::mt19937_64 g(5);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (std::size_t o = 0; o < d.U.size(); ++o) {
    d.W.emplace_back();
    for (int nu = 1; nu <= 3; ++nu) {
      std::vector<double> w(static_cast<std::size_t>(kElements) * d.sc.num_params[o][nu - 1] * kChannels);
      for (double& v : w) {
        v = dist(g);
      }
      d.W.back().push_back(std::move(w));
    }
  }
  return d;
}

void BM_SymmetricContraction(benchmark::State& state, bool naive, bool backward) {
  static const ScData d = sc_data();
  const int N = static_cast<int>(state.range(0));
  Matrix x("x", N, d.sc.dim_in()), out("out", N, d.sc.dim_out()), gout("g", N, d.sc.dim_out()), gx("gx", N, d.sc.dim_in());
  fill(x, 11);
  fill(gout, 12);
  Kokkos::View<int*, Exec> species("species", N);
  for (int n = 0; n < N; ++n) {
    species(n) = n % kElements;
  }
  SymmetricContractionKokkos<Exec, double> k(d.sc);
  k.set_weights(d.W, kElements);
  for (auto _ : state) {
    if (naive) {
      reference::compute_symmetric_contraction(d.sc, d.U, d.W, N, species.data(), x.data(), out.data());
    } else {
      k.compute(species, x, out);
      if (backward) {
        k.reverse(species, x, gout, gx);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["nodes/s"] = benchmark::Counter(N, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_RadialMLP(benchmark::State& state) {
  const int E = static_cast<int>(state.range(0));
  const auto tp = ChannelwiseTP::mace(hidden("medium"), Irreps::spherical_harmonics(3), interaction_target());
  RadialMLP mlp;
  mlp.widths = {8, 64, 64, 64, tp.weight_numel};
  std::mt19937_64 g(9);
  std::normal_distribution<double> d;
  for (int l = 0; l + 1 < static_cast<int>(mlp.widths.size()); ++l) {
    mlp.weights.emplace_back(static_cast<std::size_t>(mlp.widths[l]) * mlp.widths[l + 1]);
    for (double& v : mlp.weights.back()) {
      v = d(g);
    }
  }
  mlp.act_cst = 1.6791767923989418;
  RadialMLPKokkos<Exec, double> k(mlp);
  Matrix in("in", E, 8), out("out", E, mlp.width_out());
  fill(in, 4);
  for (auto _ : state) {
    k.compute(in, out);
    benchmark::DoNotOptimize(out.data());
  }
  double flops = 0;
  for (int l = 0; l + 1 < static_cast<int>(mlp.widths.size()); ++l) {
    flops += 2.0 * mlp.widths[l] * mlp.widths[l + 1];
  }
  state.counters["edges/s"] = benchmark::Counter(E, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(1e-9 * flops * E, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK_CAPTURE(BM_ChannelwiseTP, small_fused, "small", false)->Args({1000, 30})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ChannelwiseTP, medium_fused, "medium", false)
    ->Args({1000, 30})
    ->Args({1000, 60})
    ->Args({5000, 30})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ChannelwiseTP, large_fused, "large", false)->Args({1000, 30})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ChannelwiseTP, medium_naive, "medium", true)->Args({1000, 30})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SymmetricContraction, fused_fwd, false, false)->Arg(1000)->Arg(5000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SymmetricContraction, fused_fwd_bwd, false, true)->Arg(1000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SymmetricContraction, naive_fwd, true, false)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RadialMLP)->Arg(30000)->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
