// SPDX-License-Identifier: MIT
// math/simd_math.hpp: the vector exp and sigmoid against libm, in float and double, over the
// whole range the activations see (clamped ends included), at lengths that are not multiples
// of the SIMD width (the scalar tail runs too).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "math/simd_math.hpp"

namespace {

template <class T>
class SimdMath : public ::testing::Test {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SimdMath, Scalars);

TYPED_TEST(SimdMath, ExpWithinTwoUlpOfLibm) {
  using T = TypeParam;
  const double hi = std::is_same_v<T, float> ? 87.0 : 700.0;
  std::vector<T> x;
  for (double v = -hi; v <= hi; v += hi / 200003.0) x.push_back(static_cast<T>(v));
  x.push_back(T(0));
  std::vector<T> e(x.size());
  fastmlip::math::exp_array(x.data(), e.data(), x.size());
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = static_cast<double>(std::exp(x[i]));
    worst = std::max(worst, std::abs(static_cast<double>(e[i]) - want) / want);
    ASSERT_EQ(e[i], fastmlip::math::fast_exp(x[i])) << "vector and scalar lanes differ at " << x[i];
  }
  EXPECT_LE(worst, 2 * std::numeric_limits<T>::epsilon());
  EXPECT_EQ(fastmlip::math::fast_exp(T(0)), T(1));
}

TYPED_TEST(SimdMath, SigmoidMatchesLibmAndSaturates) {
  using T = TypeParam;
  std::vector<T> x = {T(-1e30), T(-1000), T(-90), T(-20), T(-1), T(0), T(0.5), T(3), T(20), T(90), T(1000), T(1e30),
                      T(-0.25), T(7)};  // 14 values: not a multiple of 4 or 8
  std::vector<T> s(x.size());
  fastmlip::math::sigmoid_array(x.data(), s.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    // exp's argument is clamped at 88 (float) / 709 (double): sigmoid of a very negative value
    // is that of the clamp, a tiny normal number, not 0 or a denormal.
    const T cap = std::is_same_v<T, float> ? T(88) : T(709);
    const T ref = T(1) / (T(1) + std::exp(std::min(-x[i], cap)));
    EXPECT_TRUE(std::isfinite(s[i])) << x[i];
    EXPECT_NEAR(s[i], ref, 4 * std::numeric_limits<T>::epsilon() * std::max(T(1e-30), ref)) << x[i];
    EXPECT_GE(s[i], T(0));
    EXPECT_LE(s[i], T(1));
  }
  EXPECT_EQ(s[5], T(0.5));
  EXPECT_EQ(s[11], T(1));
}

}  // namespace
