// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "../common/tolerance.hpp"
#include "kernels/impl/interleaved_sum.hpp"

namespace fastmlip::kernels {
namespace {

template <class T>
class InterleavedSum : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(InterleavedSum, Dtypes);

// The documented order, bit for bit: with a full block, element j into part j % 8, the parts in
// order, then the tail; without one, the plain serial sum. Each element is read exactly once,
// and the sum is within round-off of the exact one.
TYPED_TEST(InterleavedSum, AddsInTheDocumentedOrderAndReadsEachElementOnce) {
  using T = TypeParam;
  constexpr int P = impl::kInterleavedParts;
  for (int n : {0, 1, 2, 7, 8, 9, 15, 16, 17, 131}) {
    test::Uniform u(n + 1);
    std::vector<T> v(static_cast<std::size_t>(n));
    for (auto& x : v) {
      x = static_cast<T>(u(-1, 1));
    }
    std::vector<int> reads(static_cast<std::size_t>(n), 0);
    const T got = impl::interleaved_sum<T>(n, [&](int j) {
      ++reads[static_cast<std::size_t>(j)];
      return v[static_cast<std::size_t>(j)];
    });
    T expected = 0;
    const int blocks = n / P;
    if (blocks == 0) {
      for (int j = 0; j < n; ++j) {
        expected += v[j];
      }
    } else {
      for (int l = 0; l < P; ++l) {
        T part = 0;
        for (int b = 0; b < blocks; ++b) {
          part += v[b * P + l];
        }
        expected += part;
      }
      for (int j = blocks * P; j < n; ++j) {
        expected += v[j];
      }
    }
    EXPECT_EQ(got, expected) << "n " << n;
    long double exact = 0;
    for (int j = 0; j < n; ++j) {
      exact += v[j];
      EXPECT_EQ(reads[j], 1) << "n " << n << " element " << j;
    }
    EXPECT_NEAR(static_cast<double>(got), static_cast<double>(exact),
                n * 4 * std::numeric_limits<T>::epsilon())
        << "n " << n;
  }
}

}  // namespace
}  // namespace fastmlip::kernels
