// SPDX-License-Identifier: MIT
// The hand-written CUDA kernels at MACE-MP shapes (128 channels, spherical harmonics up to
// l = 3, correlation 3, 10 elements), timed on the GPU with CUDA events (manual time: the
// host's clock would include launch queueing). float and double, forward and reverse. The
// peers at the same shapes on the same GPU: peers_gpu.py; both run from scripts/gpu-check.sh.
// Without a GPU every case reports an error and the program exits 0, so CI can build it.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "../../tests/common/kernel_fixtures.hpp"
#include "kernels/channelwise_tp.hpp"
#include "kernels/cuda/channelwise_tp_cuda.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/symmetric_contraction_cuda.hpp"
#include "kernels/symmetric_contraction.hpp"

namespace {

using namespace fastmlip;
using kernels::ChannelwiseTP;
using kernels::SymmetricContraction;
constexpr int kChannels = 128, kElements = 10;

Irreps hidden(const std::string& which) {
  if (which == "small") {
    return Irreps::parse("128x0e");
  }
  if (which == "large") {
    return Irreps::parse("128x0e+128x1o+128x2e");
  }
  return Irreps::parse("128x0e+128x1o");
}

Irreps interaction_target() { return Irreps::parse("128x0e+128x1o+128x2e+128x3o"); }

// A device array filled with uniform(-1, 1) values made on the host from a fixed seed.
template <class T>
struct DeviceArray {
  // Random values for the first 2^20 entries, made on the host; the rest repeats them,
  // doubling on the device: the large cases hold gigabytes, which a host generator would take
  // tens of seconds to fill at each of the benchmark's repetitions.
  DeviceArray(std::size_t n, unsigned seed) : size(n) {
    FASTMLIP_CUDA_CHECK(cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(T)));
    std::vector<T> h(std::min<std::size_t>(n, std::size_t(1) << 20));
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> d(-1, 1);
    for (T& v : h) {
      v = static_cast<T>(d(g));
    }
    FASTMLIP_CUDA_CHECK(cudaMemcpy(ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    for (std::size_t done = h.size(); done < n; done *= 2) {
      FASTMLIP_CUDA_CHECK(
          cudaMemcpy(ptr + done, ptr, std::min(done, n - done) * sizeof(T), cudaMemcpyDeviceToDevice));
    }
  }
  explicit DeviceArray(const std::vector<T>& h) : size(h.size()) {
    FASTMLIP_CUDA_CHECK(cudaMalloc(&ptr, std::max<std::size_t>(size, 1) * sizeof(T)));
    FASTMLIP_CUDA_CHECK(cudaMemcpy(ptr, h.data(), size * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* ptr = nullptr;
  std::size_t size;
};

// Times `body` between two events on the default stream; one benchmark iteration each.
template <class F>
void time_on_gpu(benchmark::State& state, F&& body) {
  cudaEvent_t start, stop;
  FASTMLIP_CUDA_CHECK(cudaEventCreate(&start));
  FASTMLIP_CUDA_CHECK(cudaEventCreate(&stop));
  body();  // warm-up: first-launch costs (module load, shared-memory carve-out) stay out
  FASTMLIP_CUDA_CHECK(cudaDeviceSynchronize());
  for (auto _ : state) {
    FASTMLIP_CUDA_CHECK(cudaEventRecord(start));
    body();
    FASTMLIP_CUDA_CHECK(cudaEventRecord(stop));
    FASTMLIP_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    FASTMLIP_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(1e-3 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

bool have_gpu(benchmark::State& state) {
  if (cuda::device_count() > 0) {
    return true;
  }
  state.SkipWithError("no CUDA device");
  for (auto _ : state) {
  }
  return false;
}

// Channelwise TP, gather and scatter fused: args {nodes, neighbours}. Each node receives
// `neighbours` edges from random senders (the CPU benchmark's graph).
template <class T>
void BM_CudaChannelwiseTP(benchmark::State& state, const char* shape, bool backward) {
  if (!have_gpu(state)) {
    return;
  }
  try {
    const int N = static_cast<int>(state.range(0)), K = static_cast<int>(state.range(1)), E = N * K;
    const auto tp = ChannelwiseTP::mace(hidden(shape), Irreps::spherical_harmonics(3), interaction_target());
    std::vector<int> sender, receiver;
    std::mt19937_64 g(7);
    for (int n = 0; n < N; ++n) {
      for (int k = 0; k < K; ++k) {
        receiver.push_back(n);
        sender.push_back(static_cast<int>(g() % N));
      }
    }
    const auto index = cuda::EdgeIndexCuda::build(N, sender, receiver);
    const cuda::ChannelwiseTPCuda<T> k(tp);
    const std::size_t n1 = static_cast<std::size_t>(N) * tp.dim1(), no = static_cast<std::size_t>(N) * tp.dim_out();
    DeviceArray<T> x(n1, 1), Y(static_cast<std::size_t>(E) * tp.dim2(), 2),
        w(static_cast<std::size_t>(E) * tp.weight_numel, 3), out(no, 4), gout(no, 5);
    if (backward) {
      DeviceArray<T> gx(n1, 6), gY(static_cast<std::size_t>(E) * tp.dim2(), 7),
          gw(static_cast<std::size_t>(E) * tp.weight_numel, 8);
      time_on_gpu(state, [&] {
        k.compute(index.view(), x.ptr, Y.ptr, w.ptr, out.ptr);
        k.reverse(index.view(), x.ptr, Y.ptr, w.ptr, gout.ptr, gx.ptr, gY.ptr, gw.ptr);
      });
    } else {
      time_on_gpu(state, [&] { k.compute(index.view(), x.ptr, Y.ptr, w.ptr, out.ptr); });
    }
    // Bytes the forward must move at least: the per-edge weights and Y, the node features
    // once, the output once. Against the GPU's bandwidth this is the forward's roofline.
    const double bytes = sizeof(T) * (static_cast<double>(E) * (tp.weight_numel + tp.dim2()) + n1 + no);
    state.counters["edges/s"] = benchmark::Counter(E, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["fwd_min_GB/s"] = benchmark::Counter(1e-9 * bytes, benchmark::Counter::kIsIterationInvariantRate);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// MACE-MP medium product: 128x(0e+1o+2e+3o) -> 128x(0e+1o), correlation 3; mace-torch's U
// depends on the irreps only, so the 2-channel test fixture holds exactly the U needed here.
template <class T>
void BM_CudaSymmetricContraction(benchmark::State& state, bool backward) {
  if (!have_gpu(state)) {
    return;
  }
  try {
    const auto data = test::load_kernel_fixture(FASTMLIP_REFERENCE_DATA_DIR, "symmetric_contraction.json");
    const auto mace = test::mace_contraction_data(data["symmetric_contraction"][2]);
    const auto sc = SymmetricContraction::from_mace(interaction_target(), Irreps::parse("128x0e+128x1o"), 3, mace.U,
                                                    mace.u_shapes);
    std::vector<std::vector<std::vector<double>>> W;
    std::mt19937_64 g(5);
    std::uniform_real_distribution<double> dist(-1, 1);
    for (std::size_t o = 0; o < mace.U.size(); ++o) {
      W.emplace_back();
      for (int nu = 1; nu <= 3; ++nu) {
        std::vector<double> v(static_cast<std::size_t>(kElements) * sc.num_params[o][nu - 1] * kChannels);
        for (double& a : v) {
          a = dist(g);
        }
        W.back().push_back(std::move(v));
      }
    }
    cuda::SymmetricContractionCuda<T> k(sc);
    k.set_weights(W, kElements);
    const std::size_t N = static_cast<std::size_t>(state.range(0));
    std::vector<int> species_h(N);
    for (std::size_t n = 0; n < N; ++n) {
      species_h[n] = static_cast<int>(n % kElements);
    }
    DeviceArray<int> species(species_h);
    DeviceArray<T> x(N * sc.dim_in(), 11), out(N * sc.dim_out(), 12), gout(N * sc.dim_out(), 13),
        gx(N * sc.dim_in(), 14);
    if (backward) {
      time_on_gpu(state, [&] {
        k.compute(species.ptr, N, x.ptr, out.ptr);
        k.reverse(species.ptr, N, x.ptr, gout.ptr, gx.ptr);
      });
    } else {
      time_on_gpu(state, [&] { k.compute(species.ptr, N, x.ptr, out.ptr); });
    }
    state.counters["nodes/s"] = benchmark::Counter(static_cast<double>(N), benchmark::Counter::kIsIterationInvariantRate);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void register_all() {
  for (const char* shape : {"small", "medium", "large"}) {
    for (bool bwd : {false, true}) {
      const std::string suffix = std::string(shape) + (bwd ? "_fwd_bwd" : "_fwd");
      benchmark::RegisterBenchmark(("BM_CudaChannelwiseTP/float/" + suffix).c_str(),
                                   BM_CudaChannelwiseTP<float>, shape, bwd)
          ->Args({1000, 30})->Args({5000, 30})->UseManualTime()->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("BM_CudaChannelwiseTP/double/" + suffix).c_str(),
                                   BM_CudaChannelwiseTP<double>, shape, bwd)
          ->Args({1000, 30})->Args({5000, 30})->UseManualTime()->Unit(benchmark::kMillisecond);
    }
  }
  for (bool bwd : {false, true}) {
    const std::string suffix = bwd ? "fwd_bwd" : "fwd";
    benchmark::RegisterBenchmark(("BM_CudaSymmetricContraction/float/" + suffix).c_str(),
                                 BM_CudaSymmetricContraction<float>, bwd)
        ->Arg(1000)->Arg(10000)->UseManualTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_CudaSymmetricContraction/double/" + suffix).c_str(),
                                 BM_CudaSymmetricContraction<double>, bwd)
        ->Arg(1000)->Arg(10000)->UseManualTime()->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (cuda::device_count() > 0) {
    benchmark::AddCustomContext("cuda_device", cuda::device_summary(0));
  }
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
