// SPDX-License-Identifier: MIT
// The radial MLP's two backends on the GPU: Backend::cuda (each layer a cuBLAS GEMM,
// kernels/impl/radial_mlp_layers.hpp) against the Kokkos functors on the same device, forward
// and input gradient, float and double, odd sizes up to a model chunk's worth of edges. This
// is the comparison that must pass on a GPU before cuBLAS becomes the default there. Skipped
// where Kokkos has no CUDA device or the build found no cuBLAS (every CPU build).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <string>
#include <vector>

#include "../common/random_mlp.hpp"
#include "../common/rel_diff.hpp"
#include "../common/tolerance.hpp"
#include "kernels/backend.hpp"
#include "kernels/radial_mlp_kokkos.hpp"

namespace fastmlip::kernels {
namespace {

using Device = Kokkos::DefaultExecutionSpace;
using Dtypes = ::testing::Types<float, double>;

template <class T>
class RadialMLPCudaBackend : public ::testing::Test {};
TYPED_TEST_SUITE(RadialMLPCudaBackend, Dtypes);

TYPED_TEST(RadialMLPCudaBackend, MatchesTheKokkosFunctorsOnTheGpu) {
  using T = TypeParam;
  if constexpr (!impl::kCublasBackend<Device, T>) {
    GTEST_SKIP()
        << "no cuBLAS radial MLP in this build (needs FASTMLIP_ENABLE_CUDA, cuBLAS and a Kokkos with "
        << "CUDA; default execution space " << Device::name() << ")";
  } else {
    using M = Kokkos::View<T**, Kokkos::LayoutRight, Device>;
    const auto random = [](int rows, int cols, test::Uniform& u, double lo) {
      M m("m", rows, cols);
      auto h = Kokkos::create_mirror_view(m);
      for (std::size_t i = 0; i < h.size(); ++i) {
        h.data()[i] = static_cast<T>(u(lo, 1));
      }
      Kokkos::deep_copy(m, h);
      return m;
    };
    const auto host = [](const M& m) { return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m); };
    const double tol = test::Tolerance<T>::kernel * 50;
    std::uint64_t seed = 21;
    for (const std::vector<int>& widths : {std::vector<int>{8, 64, 64, 64, 512},
                                           {8, 64, 64, 64, 1280},
                                           {7, 13, 11, 29},
                                           {5, 9},
                                           {3, 6, 1, 4}}) {
      const RadialMLP mlp = test::random_radial_mlp(widths, 1.679177, seed++);
      const RadialMLPKokkos<Device, T> functors(mlp, Backend::kokkos), cublas(mlp, Backend::cuda);
      ASSERT_EQ(cublas.backend(), Backend::cuda);
      for (int E : {0, 1, 13, 1000, 100003}) {
        const std::string what = std::to_string(widths.size() - 1) + " layers to " +
                                 std::to_string(mlp.width_out()) + ", " + std::to_string(E) + " edges";
        test::Uniform u(seed * 1000 + E);
        const M in = random(E, mlp.width_in(), u, 0), g = random(E, mlp.width_out(), u, -1);
        M a("a", E, mlp.width_out()), b("b", E, mlp.width_out());
        M ga("ga", E, mlp.width_in()), gb("gb", E, mlp.width_in());
        functors.compute(in, a);
        cublas.compute(in, b);
        functors.reverse(in, g, ga);
        cublas.reverse(in, g, gb);
        EXPECT_LE(test::rel_diff(host(b), host(a), 1.0), tol) << what << ": forward";
        EXPECT_LE(test::rel_diff(host(gb), host(ga), 1.0), tol) << what << ": input gradient";
      }
    }
  }
}

}  // namespace
}  // namespace fastmlip::kernels
