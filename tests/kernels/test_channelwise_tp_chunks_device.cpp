// SPDX-License-Identifier: MIT
// The channelwise TP's chunked passes (EdgeIndex::chunk, compute_chunk / reverse_chunk) on Kokkos'
// default execution space, on each backend it has there: the Kokkos path everywhere, and on a
// GPU build also the hand-written CUDA kernels, whose chunks are a window on the receivers
// (forward) and a grad_x summed over the chunks (reverse). Against the same backend's pass over
// the whole index, with ghost rows (senders that receive nothing) as a model's graph has them,
// at odd sizes, in float and double. The host's bit-for-bit check is test_channelwise_tp.cpp's.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "../common/random_graph.hpp"
#include "../common/rel_diff.hpp"
#include "../common/tolerance.hpp"
#include "../common/tp_chunks.hpp"
#include "kernels/backend.hpp"
#include "kernels/channelwise_tp_kokkos.hpp"

namespace fastmlip::kernels {
namespace {

using Device = Kokkos::DefaultExecutionSpace;

template <class T>
class ChannelwiseTPChunksOnTheDevice : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ChannelwiseTPChunksOnTheDevice, Scalars);

/// The backends this build runs the TP with on Device, for T.
template <class T>
std::vector<Backend> backends() {
  std::vector<Backend> b{Backend::kokkos};
  if constexpr (impl::kCudaBackend<Device, T>) {
    b.push_back(Backend::cuda);
  }
  return b;
}

template <class T>
using M = Kokkos::View<T**, Kokkos::LayoutRight, Device>;

template <class T>
M<T> filled(const char* label, int rows, int cols, test::Uniform& u) {
  M<T> m(std::string(label), rows, cols);
  auto h = Kokkos::create_mirror_view(m);
  for (std::size_t i = 0; i < h.size(); ++i) {
    h.data()[i] = static_cast<T>(u(-1, 1));
  }
  Kokkos::deep_copy(m, h);
  return m;
}

/// test::rel_diff of two device arrays, copied to the host; the arrays' own magnitude is the scale.
template <class T>
double rel_diff(const M<T>& a, const M<T>& b) {
  return test::rel_diff(Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a),
                        Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b), 1e-300);
}

template <class T>
bool same_bits(const M<T>& a, const M<T>& b) {
  const auto ha = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a);
  const auto hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b);
  return std::equal(ha.data(), ha.data() + ha.size(), hb.data());
}

TYPED_TEST(ChannelwiseTPChunksOnTheDevice, ChunksOfReceiversGiveTheWholeIndexsResults) {
  using T = TypeParam;
  const double tol = test::Tolerance<T>::kernel;
  // Multiplicities below, at and past one 32-channel tile, and l up to 2 on both sides.
  const auto tp = ChannelwiseTP::mace(Irreps::parse("5x0e+33x1o+5x2e"), Irreps::spherical_harmonics(2),
                                      Irreps::parse("0e+1o+2e"));
  for (const Backend backend : backends<T>()) {
    const ChannelwiseTPKokkos<Device, T> k(tp, backend);
    ASSERT_EQ(k.backend(), backend);
    for (const int R : {1, 13, 301}) {  // receivers; as many ghosts again, which only send
      const int N = 2 * R;
      test::Uniform u(R + 7);
      // Edges sorted by receiver among the first R nodes, from senders anywhere.
      auto rg = test::random_graph(R, 9 * R + 2, 3 * R + 1);
      for (int& s : rg.sender) {
        s = std::min(N - 1, static_cast<int>(u(0, N)));
      }
      const int E = static_cast<int>(rg.sender.size());
      auto g = EdgeIndex<Device>::build(N, rg.sender, rg.receiver);
      g.num_receivers = R;
      const std::vector<int> ptr = test::receiver_offsets(rg.receiver, R);
      const M<T> x = filled<T>("x", N, tp.dim1(), u), Y = filled<T>("Y", E, tp.dim2(), u),
                 w = filled<T>("w", E, tp.weight_numel, u), go = filled<T>("go", R, tp.dim_out(), u);
      M<T> out("out", R, tp.dim_out()), gx("gx", N, tp.dim1()), gY("gY", E, tp.dim2()),
          gw("gw", E, tp.weight_numel);
      k.compute(g, x, Y, w, out);
      k.reverse(g, x, Y, w, go, gx, gY, gw);
      for (const int per_chunk : {1, 4, R}) {  // receivers per chunk
        const std::string at = std::string(" (") + backend_name(backend) + ", " + std::to_string(R) +
                               " receivers, " + std::to_string(per_chunk) + " a chunk)";
        M<T> cout("cout", R, tp.dim_out()), cgx("cgx", N, tp.dim1()), cgY("cgY", E, tp.dim2()),
            cgw("cgw", E, tp.weight_numel);
        // Stale values where the chunks write, so that a row left unwritten shows.
        Kokkos::deep_copy(cout, T(777));
        Kokkos::deep_copy(cgx, T(777));
        Kokkos::deep_copy(cgY, T(777));
        Kokkos::deep_copy(cgw, T(777));
        test::run_tp_in_chunks(k, g, ptr, per_chunk, x, Y, w, go, cout, cgx, cgY, cgw);
        Kokkos::fence();
        // A receiver's sum runs over its edges in the same order chunked or not.
        EXPECT_TRUE(same_bits(cout, out)) << "out" << at << ": relative difference " << rel_diff(cout, out);
        // A sender's edges may span chunks, whose partial sums then add up.
        EXPECT_LE(rel_diff(cgx, gx), tol) << "grad_x" << at;
        EXPECT_LE(rel_diff(cgY, gY), tol) << "grad_Y" << at;
        EXPECT_LE(rel_diff(cgw, gw), tol) << "grad_w" << at;
      }
    }
  }
}

}  // namespace
}  // namespace fastmlip::kernels
