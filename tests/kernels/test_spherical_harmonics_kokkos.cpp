// SPDX-License-Identifier: MIT
// The Kokkos spherical harmonics of edge vectors against the host batch (math/), bit for bit,
// and the reverse stage against central finite differences; float and double, sizes {0, 1, 13,
// 1000}, every lmax.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <vector>

#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/spherical_harmonics_kokkos.hpp"
#include "math/spherical_harmonics.hpp"

namespace fastmlip::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;

template <class T>
class SphericalHarmonicsKokkosTest : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SphericalHarmonicsKokkosTest, Dtypes);

template <class T>
Kokkos::View<T* [3], Kokkos::LayoutRight, Exec> random_vectors(int n, std::uint64_t seed) {
  test::Uniform u(seed);
  Kokkos::View<T* [3], Kokkos::LayoutRight, Exec> v("v", n);
  for (int e = 0; e < n; ++e) {
    for (int k = 0; k < 3; ++k) {
      v(e, k) = static_cast<T>(u(-3, 3));
    }
  }
  return v;
}

TYPED_TEST(SphericalHarmonicsKokkosTest, MatchesTheHostBatchBitForBit) {
  using T = TypeParam;
  for (int lmax = 0; lmax <= kMaxL; ++lmax) {
    for (const int n : test::test_sizes()) {
      const auto v = random_vectors<T>(n, 3 + n);
      const int d = sh_dim(lmax);
      SphericalHarmonicsKokkos<Exec, T> sh(lmax);
      Kokkos::View<T**, Kokkos::LayoutRight, Exec> Y("Y", n, d), G("G", n, d);
      sh.compute(v, Y);
      std::vector<T> ref(static_cast<std::size_t>(n) * d);
      compute_spherical_harmonics(lmax, n, v.data(), ref.data());
      for (std::size_t q = 0; q < ref.size(); ++q) {
        ASSERT_EQ(Y.data()[q], ref[q]) << "lmax " << lmax << " n " << n;
      }

      test::Uniform u(9);
      for (std::size_t q = 0; q < ref.size(); ++q) {
        G.data()[q] = static_cast<T>(u(-1, 1));
      }
      Kokkos::View<T* [3], Kokkos::LayoutRight, Exec> gv("gv", n);
      sh.reverse(v, G, gv);
      std::vector<T> gref(3 * static_cast<std::size_t>(n));
      reverse_spherical_harmonics(lmax, n, v.data(), G.data(), gref.data());
      for (std::size_t q = 0; q < gref.size(); ++q) {
        ASSERT_EQ(gv.data()[q], gref[q]) << "lmax " << lmax;
      }
    }
  }
}

// The reverse stage's gradient test, in double: sum_i G(e, i) Y_i(v_e) differentiated by v_e.
TEST(SphericalHarmonicsKokkos, ReverseIsTheFiniteDifferenceGradient) {
  const int n = 13, lmax = kMaxL, d = sh_dim(lmax);
  auto v = random_vectors<double>(n, 5);
  SphericalHarmonicsKokkos<Exec, double> sh(lmax);
  Kokkos::View<double**, Kokkos::LayoutRight, Exec> Y("Y", n, d), G("G", n, d);
  test::Uniform u(2);
  for (int q = 0; q < n * d; ++q) {
    G.data()[q] = u(-1, 1);
  }
  Kokkos::View<double* [3], Kokkos::LayoutRight, Exec> gv("gv", n);
  sh.reverse(v, G, gv);
  const double h = 1e-6;
  for (int e = 0; e < n; ++e) {
    for (int k = 0; k < 3; ++k) {
      double f[2];
      for (int s = 0; s < 2; ++s) {
        const double keep = v(e, k);
        v(e, k) = keep + (s == 0 ? h : -h);
        sh.compute(v, Y);
        v(e, k) = keep;
        f[s] = 0;
        for (int i = 0; i < d; ++i) {
          f[s] += G(e, i) * Y(e, i);
        }
      }
      const double fd = (f[0] - f[1]) / (2 * h);
      EXPECT_NEAR(gv(e, k), fd, test::Tolerance<double>::fd * (1 + std::abs(fd))) << e << " " << k;
    }
  }
}

TEST(SphericalHarmonicsKokkos, RefusesBadShapesAndLmax) {
  EXPECT_THROW((SphericalHarmonicsKokkos<Exec, double>(kMaxL + 1)), InputError);
  EXPECT_THROW((SphericalHarmonicsKokkos<Exec, double>(-1)), InputError);
  SphericalHarmonicsKokkos<Exec, double> sh(2);
  Kokkos::View<double* [3], Kokkos::LayoutRight, Exec> v("v", 4), gv("gv", 3);
  Kokkos::View<double**, Kokkos::LayoutRight, Exec> Y("Y", 4, 8), Yok("Y", 4, 9);
  EXPECT_THROW(sh.compute(v, Y), InputError);
  EXPECT_THROW(sh.reverse(v, Yok, gv), InputError);
}

}  // namespace
}  // namespace fastmlip::kernels
