// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cstring>

#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/segment_sum_kokkos.hpp"

namespace fastmlip::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;

template <class T>
class SegmentSum : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SegmentSum, Dtypes);

TYPED_TEST(SegmentSum, SumsSegmentsAndBroadcastsGradients) {
  using T = TypeParam;
  using M = Kokkos::View<T**, Kokkos::LayoutRight, Exec>;
  for (int S : test::test_sizes()) {
    test::Uniform u(S);
    std::vector<int> ptr{0};
    for (int s = 0; s < S; ++s) {
      ptr.push_back(ptr.back() + static_cast<int>(u(0, 9)));  // empty segments included
    }
    const int rows = ptr.back(), D = 3;
    M x("x", rows, D), out("out", S, D), g("g", S, D), gx("gx", rows, D);
    for (std::size_t i = 0; i < x.size(); ++i) {
      x.data()[i] = static_cast<T>(u(-1, 1));
    }
    for (std::size_t i = 0; i < g.size(); ++i) {
      g.data()[i] = static_cast<T>(u(-1, 1));
    }
    Kokkos::deep_copy(out, T(777));
    const SegmentSumKokkos<Exec, T> k(ptr);
    k.compute(x, out);
    k.reverse(g, gx);
    for (int s = 0; s < S; ++s) {
      for (int c = 0; c < D; ++c) {
        T expect = 0;  // the same order as the kernel: bitwise equal
        for (int r = ptr[s]; r < ptr[s + 1]; ++r) {
          expect += x(r, c);
          EXPECT_EQ(gx(r, c), g(s, c));
        }
        EXPECT_EQ(out(s, c), expect) << "segment " << s;
      }
    }
    // Reproducible bit for bit across runs.
    M again("again", S, D);
    k.compute(x, again);
    EXPECT_EQ(0, std::memcmp(again.data(), out.data(), sizeof(T) * out.size()));
  }
}

TEST(SegmentSumErrors, BadBoundariesAreClearErrors) {
  EXPECT_THROW((SegmentSumKokkos<Exec, double>(std::vector<int>{})), InputError);
  EXPECT_THROW((SegmentSumKokkos<Exec, double>(std::vector<int>{1, 2})), InputError);
  EXPECT_THROW((SegmentSumKokkos<Exec, double>(std::vector<int>{0, 3, 2})), InputError);
  const SegmentSumKokkos<Exec, double> k(std::vector<int>{0, 2, 5});
  Kokkos::View<double**, Kokkos::LayoutRight, Exec> x("x", 4, 1), out("out", 2, 1);
  EXPECT_THROW(k.compute(x, out), InputError);
}

}  // namespace
}  // namespace fastmlip::kernels
