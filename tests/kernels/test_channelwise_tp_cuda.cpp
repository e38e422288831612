// SPDX-License-Identifier: MIT
// The CUDA channelwise tensor product against the naive reference, on a GPU; skipped without
// one. Descriptor and edge-index checks happen before any CUDA call and run everywhere.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../common/random_graph.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/cuda/channelwise_tp_cuda.hpp"
#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/device.hpp"
#include "kernels/reference/channelwise_tp_ref.hpp"

namespace fastmlip::cuda {
namespace {

using kernels::ChannelwiseTP;

template <class T>
struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t n) : size(n) {
    FASTMLIP_CUDA_CHECK(cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(T)));
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<T>& h) {
    FASTMLIP_CUDA_CHECK(cudaMemcpy(ptr, h.data(), size * sizeof(T), cudaMemcpyHostToDevice));
  }
  void poison() {  // all-ones bytes are a NaN in float and double: unwritten outputs fail
    FASTMLIP_CUDA_CHECK(cudaMemset(ptr, 0xFF, std::max<std::size_t>(size, 1) * sizeof(T)));
  }
  std::vector<T> download() const {
    std::vector<T> h(size);
    FASTMLIP_CUDA_CHECK(cudaMemcpy(h.data(), ptr, size * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  T* ptr = nullptr;
  std::size_t size;
};

// MACE's interaction target: (sh * channels).sort().simplify().
Irreps mace_target(int lmax, int channels) {
  std::vector<MulIrrep> e;
  for (const auto& s : Irreps::spherical_harmonics(lmax)) {
    e.push_back({channels, s.ir});
  }
  return Irreps(e);
}

using Graph = test::RandomGraph;
using test::random_graph;

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
  test::Uniform u(seed);
  std::vector<T> v(n);
  for (T& a : v) {
    a = static_cast<T>(u(-1, 1));
  }
  return v;
}

template <class T>
struct Run {
  std::vector<T> out, grad_x, grad_Y, grad_w;
};

// Forward and reverse on the GPU, every output poisoned first.
template <class T>
Run<T> run_cuda(const ChannelwiseTPCuda<T>& k, const Graph& graph, int nodes, const std::vector<T>& x,
                const std::vector<T>& Y, const std::vector<T>& w, const std::vector<T>& gout) {
  const ChannelwiseTP& tp = k.descriptor();
  const auto edges = EdgeIndexCuda::build(nodes, graph.sender, graph.receiver);
  const std::size_t E = graph.sender.size();
  DeviceBuffer<T> d_x(x.size()), d_Y(Y.size()), d_w(w.size()), d_g(gout.size());
  DeviceBuffer<T> d_out(static_cast<std::size_t>(nodes) * tp.dim_out()), d_gx(x.size()), d_gY(Y.size()),
      d_gw(w.size());
  d_x.upload(x);
  d_Y.upload(Y);
  d_w.upload(w);
  d_g.upload(gout);
  for (auto* b : {&d_out, &d_gx, &d_gY, &d_gw}) {
    b->poison();
  }
  EXPECT_EQ(E, static_cast<std::size_t>(edges.view().num_edges));
  k.compute(edges.view(), d_x.ptr, d_Y.ptr, d_w.ptr, d_out.ptr);
  k.reverse(edges.view(), d_x.ptr, d_Y.ptr, d_w.ptr, d_g.ptr, d_gx.ptr, d_gY.ptr, d_gw.ptr);
  FASTMLIP_CUDA_CHECK(cudaDeviceSynchronize());
  return {d_out.download(), d_gx.download(), d_gY.download(), d_gw.download()};
}

template <class T>
class ChannelwiseTPCudaTyped : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ChannelwiseTPCudaTyped, Dtypes);

// Shapes that reach every code path: one partial channel tile (5), a full and a partial tile
// (40), l1 = 3 (edge gradients with run-time sizes), and l = 4 (run-time sizes everywhere).
// Odd multiplicities also take the unvectorised staging path, even ones the 16-byte path.
std::vector<ChannelwiseTP> shapes() {
  return {
      ChannelwiseTP::mace(Irreps::parse("5x0e"), Irreps::spherical_harmonics(3), mace_target(3, 5)),
      ChannelwiseTP::mace(Irreps::parse("40x0e+40x1o"), Irreps::spherical_harmonics(3), mace_target(3, 40)),
      ChannelwiseTP::mace(Irreps::parse("3x0e+3x1o+3x2e+3x3o"), Irreps::spherical_harmonics(3),
                          mace_target(3, 3)),
      ChannelwiseTP::mace(Irreps::parse("2x0e+2x2e+2x4e"), Irreps::spherical_harmonics(4),
                          mace_target(4, 2))};
}

TYPED_TEST(ChannelwiseTPCudaTyped, ForwardAndReverseMatchReference) {
  using T = TypeParam;
  if (device_count() == 0) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  const auto all = shapes();
  for (std::size_t which = 0; which < all.size(); ++which) {
    const ChannelwiseTP& tp = all[which];
    const ChannelwiseTPCuda<T> k(tp);
    std::vector<int> sizes = test::test_sizes();
    if (which == 0) {
      sizes.push_back(20000);  // more warps than the persistent grid holds: the grid-stride loops
    }
    for (int N : sizes) {
      const int nodes = which >= 2 ? std::min(N, 200) : N;  // the dense reference is slow on purpose
      const int edges = nodes * 7;
      const Graph graph = random_graph(nodes, edges, 11 + N + which);
      const auto x = random_values<T>(static_cast<std::size_t>(nodes) * tp.dim1(), N + 1);
      const auto Y = random_values<T>(static_cast<std::size_t>(edges) * tp.dim2(), N + 2);
      const auto w = random_values<T>(static_cast<std::size_t>(edges) * tp.weight_numel, N + 3);
      const auto gout = random_values<T>(static_cast<std::size_t>(nodes) * tp.dim_out(), N + 4);
      const Run<T> got = run_cuda(k, graph, nodes, x, Y, w, gout);

      Run<T> ref{std::vector<T>(gout.size()), std::vector<T>(x.size()), std::vector<T>(Y.size()),
                 std::vector<T>(w.size())};
      kernels::reference::compute_channelwise_tp(tp, nodes, edges, graph.sender.data(), graph.receiver.data(),
                                                 x.data(), Y.data(), w.data(), ref.out.data());
      kernels::reference::reverse_channelwise_tp(tp, nodes, edges, graph.sender.data(), graph.receiver.data(),
                                                 x.data(), Y.data(), w.data(), gout.data(), ref.grad_x.data(),
                                                 ref.grad_Y.data(), ref.grad_w.data());
      // Sums of a few edges x tens of CG terms (grad_Y: x all channels) of O(1) values.
      const double tol = test::Tolerance<T>::kernel * 100;
      auto compare = [&](const std::vector<T>& a, const std::vector<T>& b, const char* what) {
        ASSERT_EQ(a.size(), b.size()) << what;
        for (std::size_t i = 0; i < b.size(); ++i) {
          ASSERT_NEAR(a[i], b[i], tol * std::max(1.0, std::abs(double(b[i]))))
              << what << " " << i << ", " << tp.irreps1.str() << ", " << nodes << " nodes";
        }
      };
      compare(got.out, ref.out, "out");
      compare(got.grad_x, ref.grad_x, "grad_x");
      compare(got.grad_Y, ref.grad_Y, "grad_Y");
      compare(got.grad_w, ref.grad_w, "grad_w");
    }
  }
}

// No atomics and fixed summation orders: two runs agree to the last bit.
TYPED_TEST(ChannelwiseTPCudaTyped, IsBitwiseReproducible) {
  using T = TypeParam;
  if (device_count() == 0) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  const ChannelwiseTP tp = shapes()[1];
  const ChannelwiseTPCuda<T> k(tp);
  const int nodes = 1000, edges = 30000;
  const Graph graph = random_graph(nodes, edges, 5);
  const auto x = random_values<T>(static_cast<std::size_t>(nodes) * tp.dim1(), 6);
  const auto Y = random_values<T>(static_cast<std::size_t>(edges) * tp.dim2(), 7);
  const auto w = random_values<T>(static_cast<std::size_t>(edges) * tp.weight_numel, 8);
  const auto gout = random_values<T>(static_cast<std::size_t>(nodes) * tp.dim_out(), 9);
  const Run<T> a = run_cuda(k, graph, nodes, x, Y, w, gout), b = run_cuda(k, graph, nodes, x, Y, w, gout);
  for (auto [u, v] : {std::pair{&a.out, &b.out}, std::pair{&a.grad_x, &b.grad_x},
                      std::pair{&a.grad_Y, &b.grad_Y}, std::pair{&a.grad_w, &b.grad_w}}) {
    ASSERT_EQ(u->size(), v->size());
    EXPECT_EQ(0, std::memcmp(u->data(), v->data(), u->size() * sizeof(T)));
  }
}

// reverse_accumulate over the edges in two parts (those of the first receivers, then the rest,
// each an index of its own over every node) adds to grad_x what reverse() over all the edges
// writes, leaves the rows of senders without an edge in a part as they were, and gives each
// part's edge gradients bit for bit: the CUDA kernels' share of a model's chunked pass.
TYPED_TEST(ChannelwiseTPCudaTyped, ReverseAccumulateOverPartsAddsTheWholeGradient) {
  using T = TypeParam;
  if (device_count() == 0) {
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  const ChannelwiseTP tp =
      ChannelwiseTP::mace(Irreps::parse("40x0e+40x1o"), Irreps::spherical_harmonics(3), mace_target(3, 40));
  const ChannelwiseTPCuda<T> k(tp);
  for (int nodes : {1, 13, 301}) {
    const Graph graph = random_graph(nodes, 7 * nodes + 2, 5 + nodes);
    const std::size_t E = graph.sender.size();
    const auto x = random_values<T>(static_cast<std::size_t>(nodes) * tp.dim1(), nodes + 1);
    const auto Y = random_values<T>(E * tp.dim2(), nodes + 2);
    const auto w = random_values<T>(E * tp.weight_numel, nodes + 3);
    const auto gout = random_values<T>(static_cast<std::size_t>(nodes) * tp.dim_out(), nodes + 4);
    const auto start = random_values<T>(x.size(), nodes + 5);  // what grad_x held before
    const Run<T> whole = run_cuda(k, graph, nodes, x, Y, w, gout);
    // The parts: edges of receivers [0, nodes / 2), then the rest.
    const std::size_t split =
        std::lower_bound(graph.receiver.begin(), graph.receiver.end(), nodes / 2) - graph.receiver.begin();
    DeviceBuffer<T> d_x(x.size()), d_Y(Y.size()), d_w(w.size()), d_g(gout.size()), d_gx(x.size()),
        d_gY(Y.size()), d_gw(w.size());
    d_x.upload(x);
    d_Y.upload(Y);
    d_w.upload(w);
    d_g.upload(gout);
    d_gx.upload(start);
    d_gY.poison();
    d_gw.poison();
    std::vector<bool> sends(nodes, false);
    for (const auto& [begin, end] : {std::pair<std::size_t, std::size_t>{0, split}, {split, E}}) {
      const std::vector<int> s(graph.sender.begin() + begin, graph.sender.begin() + end),
          r(graph.receiver.begin() + begin, graph.receiver.begin() + end);
      for (int a : s) {
        sends[a] = true;
      }
      const auto part = EdgeIndexCuda::build(nodes, s, r);
      k.reverse_accumulate(part.view(), d_x.ptr, d_Y.ptr + begin * tp.dim2(),
                           d_w.ptr + begin * tp.weight_numel, d_g.ptr, d_gx.ptr, d_gY.ptr + begin * tp.dim2(),
                           d_gw.ptr + begin * tp.weight_numel);
    }
    FASTMLIP_CUDA_CHECK(cudaDeviceSynchronize());
    const auto gx = d_gx.download(), gY = d_gY.download(), gw = d_gw.download();
    double scale = 1e-30;
    for (T v : whole.grad_x) {
      scale = std::max(scale, std::abs(static_cast<double>(v)));
    }
    const double tol = test::Tolerance<T>::kernel;
    for (std::size_t i = 0; i < gx.size(); ++i) {
      const int a = static_cast<int>(i / tp.dim1());
      if (!sends[a]) {
        ASSERT_EQ(gx[i], start[i]) << "grad_x of node " << a << ", which sends nothing, changed";
      } else {
        ASSERT_NEAR(gx[i], start[i] + whole.grad_x[i], tol * (scale + 1))
            << "grad_x " << i << ", " << nodes << " nodes";
      }
    }
    for (std::size_t i = 0; i < gY.size(); ++i) {
      ASSERT_EQ(gY[i], whole.grad_Y[i]) << "grad_Y " << i;
    }
    for (std::size_t i = 0; i < gw.size(); ++i) {
      ASSERT_EQ(gw[i], whole.grad_w[i]) << "grad_w " << i;
    }
  }
}

// These checks run before any CUDA call, so they hold on machines without a GPU too.
TEST(ChannelwiseTPCuda, RejectsWhatTheKernelsCannotRun) {
  auto tp =
      ChannelwiseTP::mace(Irreps::parse("4x0e+4x1o"), Irreps::spherical_harmonics(2), mace_target(2, 4));
  auto twice = tp;
  twice.instructions.push_back(twice.instructions[0]);  // a second owner of output entry 0
  try {
    ChannelwiseTPCuda<double> k(twice);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("output entry 0"), std::string::npos) << e.what();
  }
  auto many = tp;
  while (many.instructions.size() <= 48) {
    many.instructions.push_back(tp.instructions[0]);
  }
  try {
    ChannelwiseTPCuda<float> k(many);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("up to 48"), std::string::npos) << e.what();
  }
  EXPECT_THROW(EdgeIndexCuda::build(3, {0, 1}, {2, 1}), InputError);  // not sorted by receiver
  EXPECT_THROW(EdgeIndexCuda::build(3, {0, 7}, {1, 1}), InputError);  // sender out of range
  EXPECT_THROW(EdgeIndexCuda::build(3, {0}, {1, 2}), InputError);     // lengths differ
}

}  // namespace
}  // namespace fastmlip::cuda
