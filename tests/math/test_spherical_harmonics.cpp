// SPDX-License-Identifier: MIT
// Spherical harmonics: parity with e3nn (tests/reference/data/math/spherical_harmonics.json),
// the reverse pass against finite differences, equivariance, inversion parity, the zero
// vector, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "math/spherical_harmonics.hpp"
#include "math/wigner_d.hpp"
#include "math_test_util.hpp"

namespace fastmlip {
namespace {

using test::rel_err;
using test::report;
using test::Tolerance;

constexpr int kDim = sh_dim(kMaxL);

template <class T>
class SphericalHarmonicsTest : public ::testing::Test {};
TYPED_TEST_SUITE(SphericalHarmonicsTest, test::FloatTypes);

// Random vectors with lengths 0.5..2 (finite differences need |v| well away from 0).
template <class T>
std::vector<T> random_vectors(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> length(0.5, 2.0);
  std::vector<T> v(3 * n);
  for (std::size_t e = 0; e < n; ++e) {
    const double x = normal(rng), y = normal(rng), z = normal(rng),
                 s = length(rng) / std::sqrt(x * x + y * y + z * z);
    v[3 * e] = static_cast<T>(x * s);
    v[3 * e + 1] = static_cast<T>(y * s);
    v[3 * e + 2] = static_cast<T>(z * s);
  }
  return v;
}

TYPED_TEST(SphericalHarmonicsTest, MatchesE3nnValuesAndJacobian) {
  using T = TypeParam;
  const nlohmann::json fx = test::load_fixture("spherical_harmonics.json");
  ASSERT_EQ(fx.at("lmax").get<int>(), kMaxL);
  const auto vectors = fx.at("vectors").get<std::vector<std::vector<double>>>();
  const auto ref_sh = fx.at("sh").get<std::vector<std::vector<double>>>();
  const auto ref_jac = fx.at("jacobian").get<std::vector<std::vector<std::vector<double>>>>();
  ASSERT_GE(vectors.size(), 10u);

  const std::size_t n = vectors.size();
  std::vector<T> v(3 * n), sh(kDim * n), jac(3 * kDim * n);
  for (std::size_t e = 0; e < n; ++e) {
    for (int k = 0; k < 3; ++k) {
      v[3 * e + k] = static_cast<T>(vectors[e][k]);
    }
  }
  compute_spherical_harmonics<T>(kMaxL, n, v.data(), sh.data(), jac.data());

  double worst_sh = 0, worst_jac = 0;
  for (std::size_t e = 0; e < n; ++e) {
    const double len = std::sqrt(vectors[e][0] * vectors[e][0] + vectors[e][1] * vectors[e][1] +
                                 vectors[e][2] * vectors[e][2]);
    // Natural scales: components of Y are O(1); its derivatives O(1/|v|) (1/1e-12 under the clamp).
    const double jac_scale = 1.0 / std::max(len, 1e-12);
    for (int i = 0; i < kDim; ++i) {
      const double e_sh = rel_err(sh[kDim * e + i], ref_sh[e][i], 1.0);
      worst_sh = std::max(worst_sh, e_sh);
      EXPECT_LE(e_sh, Tolerance<T>::fixture) << "vector " << e << " component " << i;
      for (int k = 0; k < 3; ++k) {
        const double e_jac = rel_err(jac[3 * (kDim * e + i) + k], ref_jac[e][i][k], jac_scale);
        worst_jac = std::max(worst_jac, e_jac);
        EXPECT_LE(e_jac, Tolerance<T>::fixture) << "vector " << e << " component " << i << " d/dv" << k;
      }
    }
  }
  report(std::string("SH vs e3nn, ") + test::dtype_name<T>(), worst_sh);
  report(std::string("SH Jacobian vs e3nn autograd, ") + test::dtype_name<T>(), worst_jac);
}

TYPED_TEST(SphericalHarmonicsTest, BatchedMatchesSingleVectorForEverySize) {
  using T = TypeParam;
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{13}, std::size_t{1024}}) {
    for (int lmax = 0; lmax <= kMaxL; ++lmax) {
      const int d = sh_dim(lmax);
      const std::vector<T> v = random_vectors<T>(n, 11 + n);
      std::vector<T> sh(d * n), jac(3 * d * n), sh_only(d * n);
      compute_spherical_harmonics<T>(lmax, n, v.data(), sh.data(), jac.data());
      compute_spherical_harmonics<T>(lmax, n, v.data(), sh_only.data());
      EXPECT_EQ(sh, sh_only);  // the Jacobian branch must not change the values
      for (std::size_t e = 0; e < n; ++e) {
        T one[kDim], one_jac[3 * kDim];
        spherical_harmonics<T>(lmax, v.data() + 3 * e, one, one_jac);
        for (int i = 0; i < d; ++i) {
          ASSERT_EQ(sh[d * e + i], one[i]);
          for (int k = 0; k < 3; ++k) {
            ASSERT_EQ(jac[3 * (d * e + i) + k], one_jac[3 * i + k]);
          }
        }
      }
    }
  }
  // n = 0 needs no arrays at all.
  compute_spherical_harmonics<T>(2, 0, nullptr, nullptr);
  reverse_spherical_harmonics<T>(2, 0, nullptr, nullptr, nullptr);
}

TYPED_TEST(SphericalHarmonicsTest, JacobianMatchesFiniteDifferences) {
  using T = TypeParam;
  const std::size_t n = 13;
  const std::vector<T> v = random_vectors<T>(n, 7);
  const T h = static_cast<T>(Tolerance<T>::fd_step);
  double worst = 0;
  for (std::size_t e = 0; e < n; ++e) {
    T sh[kDim], jac[3 * kDim];
    spherical_harmonics<T>(kMaxL, v.data() + 3 * e, sh, jac);
    const double len = std::sqrt(double(v[3 * e]) * v[3 * e] + double(v[3 * e + 1]) * v[3 * e + 1] +
                                 double(v[3 * e + 2]) * v[3 * e + 2]);
    for (int k = 0; k < 3; ++k) {
      T plus[3] = {v[3 * e], v[3 * e + 1], v[3 * e + 2]}, minus[3] = {v[3 * e], v[3 * e + 1], v[3 * e + 2]};
      plus[k] += h;
      minus[k] -= h;
      T sp[kDim], sm[kDim];
      spherical_harmonics<T>(kMaxL, plus, sp);
      spherical_harmonics<T>(kMaxL, minus, sm);
      for (int i = 0; i < kDim; ++i) {
        const double fd = (double(sp[i]) - double(sm[i])) / (double(plus[k]) - double(minus[k]));
        const double err = rel_err(jac[3 * i + k], fd, 1.0 / len);
        worst = std::max(worst, err);
        EXPECT_LE(err, Tolerance<T>::fd) << "vector " << e << " component " << i << " d/dv" << k;
      }
    }
  }
  report(std::string("SH Jacobian vs finite differences, ") + test::dtype_name<T>(), worst);
}

TYPED_TEST(SphericalHarmonicsTest, ReverseIsTheVectorJacobianProduct) {
  using T = TypeParam;
  for (int size : {1, 13, 1024}) {
    const std::size_t n = static_cast<std::size_t>(size);
    const std::vector<T> v = random_vectors<T>(n, 3 + n);
    std::mt19937_64 rng(5);
    std::normal_distribution<double> normal;
    std::vector<T> g(kDim * n), grad_v(3 * n), sh(kDim * n), jac(3 * kDim * n);
    for (T& x : g) {
      x = static_cast<T>(normal(rng));
    }
    reverse_spherical_harmonics<T>(kMaxL, n, v.data(), g.data(), grad_v.data());
    compute_spherical_harmonics<T>(kMaxL, n, v.data(), sh.data(), jac.data());
    for (std::size_t e = 0; e < n; ++e) {
      for (int k = 0; k < 3; ++k) {
        double expect = 0, scale = 0;
        for (int i = 0; i < kDim; ++i) {
          expect += double(g[kDim * e + i]) * jac[3 * (kDim * e + i) + k];
          scale += std::abs(double(g[kDim * e + i]) * jac[3 * (kDim * e + i) + k]);
        }
        EXPECT_LE(rel_err(grad_v[3 * e + k], expect, scale), Tolerance<T>::identity);
      }
    }
  }
  // And against finite differences of the scalar loss g . Y(v), independently of the Jacobian.
  const std::vector<T> v = random_vectors<T>(4, 99);
  std::vector<T> g(kDim * 4);
  for (std::size_t i = 0; i < g.size(); ++i) {
    g[i] = static_cast<T>(std::sin(1.0 + i));
  }
  std::vector<T> grad_v(12);
  reverse_spherical_harmonics<T>(kMaxL, 4, v.data(), g.data(), grad_v.data());
  const double h = Tolerance<T>::fd_step;
  for (std::size_t e = 0; e < 4; ++e) {
    for (int k = 0; k < 3; ++k) {
      double loss[2], at[2];
      for (int s = 0; s < 2; ++s) {
        T p[3] = {v[3 * e], v[3 * e + 1], v[3 * e + 2]};
        p[k] = static_cast<T>(p[k] + (s == 0 ? h : -h));
        at[s] = p[k];  // the step actually taken, after rounding to T
        T y[kDim];
        spherical_harmonics<T>(kMaxL, p, y);
        loss[s] = 0;
        for (int i = 0; i < kDim; ++i) {
          loss[s] += double(g[kDim * e + i]) * y[i];
        }
      }
      const double fd = (loss[0] - loss[1]) / (at[0] - at[1]);
      EXPECT_LE(rel_err(grad_v[3 * e + k], fd, 10.0), Tolerance<T>::fd) << "vector " << e << " d/dv" << k;
    }
  }
}

TYPED_TEST(SphericalHarmonicsTest, ComponentNormalisation) {
  using T = TypeParam;
  const std::vector<T> v = random_vectors<T>(13, 21);
  for (std::size_t e = 0; e < 13; ++e) {
    T sh[kDim];
    spherical_harmonics<T>(kMaxL, v.data() + 3 * e, sh);
    for (int l = 0; l <= kMaxL; ++l) {
      double sum = 0;
      for (int i = l * l; i < (l + 1) * (l + 1); ++i) {
        sum += double(sh[i]) * sh[i];
      }
      EXPECT_LE(rel_err(sum, 2 * l + 1, 1.0), Tolerance<T>::identity) << "l = " << l;
    }
    // Y_1 is sqrt(3) times the unit vector, in e3nn's (x, y, z) order.
    const double len = std::sqrt(double(v[3 * e]) * v[3 * e] + double(v[3 * e + 1]) * v[3 * e + 1] +
                                 double(v[3 * e + 2]) * v[3 * e + 2]);
    for (int k = 0; k < 3; ++k) {
      EXPECT_LE(rel_err(sh[1 + k], std::sqrt(3.0) * v[3 * e + k] / len, 1.0), Tolerance<T>::identity);
    }
  }
}

TYPED_TEST(SphericalHarmonicsTest, InversionParity) {
  using T = TypeParam;
  const std::vector<T> v = random_vectors<T>(13, 31);
  for (std::size_t e = 0; e < 13; ++e) {
    const T neg[3] = {-v[3 * e], -v[3 * e + 1], -v[3 * e + 2]};
    T y[kDim], yn[kDim], j[3 * kDim], jn[3 * kDim];
    spherical_harmonics<T>(kMaxL, v.data() + 3 * e, y, j);
    spherical_harmonics<T>(kMaxL, neg, yn, jn);
    for (int l = 0; l <= kMaxL; ++l) {
      const T sign = l % 2 == 0 ? T(1) : T(-1);
      for (int i = l * l; i < (l + 1) * (l + 1); ++i) {
        // Exact, not approximate: every operation of the evaluation is odd or even in v, and
        // IEEE rounding is symmetric under negation.
        EXPECT_EQ(yn[i], sign * y[i]) << "l = " << l;
        for (int k = 0; k < 3; ++k) {
          EXPECT_EQ(jn[3 * i + k], -sign * j[3 * i + k]) << "l = " << l;
        }
      }
    }
  }
}

TYPED_TEST(SphericalHarmonicsTest, EquivariantUnderRandomRotations) {
  using T = TypeParam;
  std::mt19937_64 rng(2024);
  const std::vector<T> v = random_vectors<T>(13, 41);
  double worst = 0;
  for (int trial = 0; trial < 8; ++trial) {
    const Mat3<T> R = test::random_rotation<T>(rng);
    std::vector<std::vector<T>> D;
    for (int l = 0; l <= kMaxL; ++l) {
      D.push_back(wigner_D<T>(l, R));
    }
    for (std::size_t e = 0; e < 13; ++e) {
      const T* x = v.data() + 3 * e;
      const T rx[3] = {R[0] * x[0] + R[1] * x[1] + R[2] * x[2], R[3] * x[0] + R[4] * x[1] + R[5] * x[2],
                       R[6] * x[0] + R[7] * x[1] + R[8] * x[2]};
      T y[kDim], yr[kDim];
      spherical_harmonics<T>(kMaxL, x, y);
      spherical_harmonics<T>(kMaxL, rx, yr);
      for (int l = 0; l <= kMaxL; ++l) {
        const int d = 2 * l + 1;
        for (int i = 0; i < d; ++i) {
          double dy = 0;
          for (int j = 0; j < d; ++j) {
            dy += double(D[l][i * d + j]) * y[l * l + j];
          }
          const double err = rel_err(yr[l * l + i], dy, 1.0);
          worst = std::max(worst, err);
          EXPECT_LE(err, Tolerance<T>::identity) << "l = " << l;
        }
      }
    }
  }
  report(std::string("Y(Rv) vs D(R) Y(v), ") + test::dtype_name<T>(), worst);
}

TYPED_TEST(SphericalHarmonicsTest, ZeroVectorGivesE3nnValuesWithoutNaN) {
  using T = TypeParam;
  // e3nn normalises with torch's normalize, which divides by max(|v|, 1e-12): the zero vector
  // maps to 0, where the (homogeneous) harmonics are 1 for l = 0 and 0 above. Autograd through
  // that clamp gives dY/dv = grad P(0) / 1e-12: sqrt(3)/1e-12 on the l = 1 diagonal, 0 elsewhere.
  const T zero[3] = {0, 0, 0};
  T y[kDim], j[3 * kDim];
  spherical_harmonics<T>(kMaxL, zero, y, j);
  EXPECT_EQ(y[0], T(1));
  for (int i = 1; i < kDim; ++i) {
    EXPECT_EQ(y[i], T(0)) << "component " << i;
  }
  for (int i = 0; i < kDim; ++i) {
    for (int k = 0; k < 3; ++k) {
      ASSERT_TRUE(std::isfinite(j[3 * i + k]));
      const double expect = (i >= 1 && i <= 3 && i - 1 == k) ? std::sqrt(3.0) / 1e-12 : 0.0;
      EXPECT_LE(rel_err(j[3 * i + k], expect, 1.0), Tolerance<T>::identity)
          << "component " << i << " d/dv" << k;
    }
  }
  T g[3];
  const std::vector<T> ones(kDim, T(1));
  reverse_spherical_harmonics<T>(kMaxL, 1, zero, ones.data(), g);
  for (T x : g) {
    EXPECT_TRUE(std::isfinite(x));
  }
}

TEST(SphericalHarmonics, RejectsUnsupportedLmaxAndNullArrays) {
  double v[3] = {1, 2, 3}, out[64], g[3];
  test::expect_input_error([&] { spherical_harmonics<double>(5, v, out); }, {"lmax 5", "l <= 4"});
  test::expect_input_error([&] { spherical_harmonics<double>(-1, v, out); }, {"lmax -1"});
  test::expect_input_error([&] { compute_spherical_harmonics<double>(9, 1, v, out); }, {"lmax 9", "l <= 4"});
  test::expect_input_error([&] { reverse_spherical_harmonics<double>(5, 1, v, out, g); }, {"lmax 5"});
  test::expect_input_error([&] { compute_spherical_harmonics<double>(2, 3, nullptr, out); },
                           {"null", "3 vectors"});
  test::expect_input_error([&] { reverse_spherical_harmonics<double>(2, 1, v, nullptr, g); }, {"null"});
}

}  // namespace
}  // namespace fastmlip
