// SPDX-License-Identifier: MIT
// Wigner D matrices: parity with e3nn (tests/reference/data/math/wigner_D.json), the group
// properties, the O(3) extension on irreps, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "math/limits.hpp"
#include "math/wigner_d.hpp"
#include "math_test_util.hpp"

namespace fastmlip {
namespace {

using test::rel_err;
using test::report;
using test::Tolerance;

template <class T>
class WignerDTest : public ::testing::Test {};
TYPED_TEST_SUITE(WignerDTest, test::FloatTypes);

template <class T>
std::vector<T> matmul(const std::vector<T>& a, const std::vector<T>& b, int n) {
  std::vector<T> c(static_cast<std::size_t>(n * n), T(0));
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < n; ++k) {
      for (int j = 0; j < n; ++j) {
        c[i * n + j] += a[i * n + k] * b[k * n + j];
      }
    }
  }
  return c;
}

TYPED_TEST(WignerDTest, MatchesE3nn) {
  using T = TypeParam;
  const nlohmann::json fx = test::load_fixture("wigner_D.json");
  double worst_d = 0, worst_r = 0;
  for (const nlohmann::json& rot : fx.at("rotations")) {
    const auto abc = rot.at("angles").get<std::vector<double>>();
    const auto matrix = rot.at("matrix").get<std::vector<double>>();
    const Mat3<T> R =
        rotation_from_euler<T>(static_cast<T>(abc[0]), static_cast<T>(abc[1]), static_cast<T>(abc[2]));
    for (int k = 0; k < 9; ++k) {
      const double err = rel_err(R[k], matrix[k], 1.0);
      worst_r = std::max(worst_r, err);
      EXPECT_LE(err, Tolerance<T>::fixture);
    }
    Mat3<T> R_fixture;
    for (int k = 0; k < 9; ++k) {
      R_fixture[k] = static_cast<T>(matrix[k]);
    }
    for (int l = 0; l <= kMaxL; ++l) {
      const auto expect = rot.at("D").at(l).get<std::vector<double>>();
      const std::vector<T> from_angles =
          wigner_D<T>(l, static_cast<T>(abc[0]), static_cast<T>(abc[1]), static_cast<T>(abc[2]));
      const std::vector<T> from_matrix = wigner_D<T>(l, R_fixture);
      ASSERT_EQ(from_angles.size(), expect.size());
      for (std::size_t n = 0; n < expect.size(); ++n) {
        // D is orthogonal: entries are at most 1, so 1 is the natural scale.
        const double e1 = rel_err(from_angles[n], expect[n], 1.0),
                     e2 = rel_err(from_matrix[n], expect[n], 1.0);
        worst_d = std::max({worst_d, e1, e2});
        EXPECT_LE(e1, Tolerance<T>::fixture) << "l = " << l << " entry " << n;
        EXPECT_LE(e2, Tolerance<T>::fixture) << "l = " << l << " entry " << n;
      }
    }
  }
  // An improper rotation on irreps of both parities.
  const nlohmann::json& imp = fx.at("improper");
  const Irreps irreps = Irreps::parse(imp.at("irreps").get<std::string>());
  const auto matrix = imp.at("matrix").get<std::vector<double>>();
  const auto expect = imp.at("D").get<std::vector<double>>();
  Mat3<T> R;
  for (int k = 0; k < 9; ++k) {
    R[k] = static_cast<T>(matrix[k]);
  }
  const std::vector<T> D = wigner_D<T>(irreps, R);
  ASSERT_EQ(D.size(), expect.size());
  for (std::size_t n = 0; n < expect.size(); ++n) {
    const double err = rel_err(D[n], expect[n], 1.0);
    worst_d = std::max(worst_d, err);
    EXPECT_LE(err, Tolerance<T>::fixture) << irreps.str() << " entry " << n;
  }
  report(std::string("Wigner D vs e3nn, ") + test::dtype_name<T>(), worst_d);
  report(std::string("Euler rotation matrix vs e3nn, ") + test::dtype_name<T>(), worst_r);
}

TYPED_TEST(WignerDTest, IsARepresentation) {
  using T = TypeParam;
  std::mt19937_64 rng(9);
  const Mat3<T> identity = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  for (int trial = 0; trial < 4; ++trial) {
    const Mat3<T> A = test::random_rotation<T>(rng), B = test::random_rotation<T>(rng);
    Mat3<T> AB{};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        for (int k = 0; k < 3; ++k) {
          AB[3 * i + j] += A[3 * i + k] * B[3 * k + j];
        }
      }
    }
    for (int l = 0; l <= kMaxL; ++l) {
      const int d = 2 * l + 1;
      const std::vector<T> Da = wigner_D<T>(l, A), Db = wigner_D<T>(l, B), Dab = wigner_D<T>(l, AB);
      const std::vector<T> prod = matmul(Da, Db, d);
      std::vector<T> DaT(Da.size());
      for (int i = 0; i < d; ++i) {
        for (int j = 0; j < d; ++j) {
          DaT[i * d + j] = Da[j * d + i];
        }
      }
      const std::vector<T> gram = matmul(DaT, Da, d);
      const std::vector<T> Did = wigner_D<T>(l, identity);
      for (int n = 0; n < d * d; ++n) {
        EXPECT_LE(rel_err(Dab[n], prod[n], 1.0), Tolerance<T>::identity) << "D(AB) = D(A) D(B), l = " << l;
        const double id = (n / d == n % d) ? 1.0 : 0.0;
        EXPECT_LE(rel_err(gram[n], id, 1.0), Tolerance<T>::identity) << "D^T D = I, l = " << l;
        EXPECT_LE(rel_err(Did[n], id, 1.0), Tolerance<T>::identity) << "D(I) = I, l = " << l;
      }
    }
    // In e3nn's basis Y_1(v) = sqrt(3) v / |v|, so D^1 is R itself.
    const std::vector<T> D1 = wigner_D<T>(1, A);
    for (int n = 0; n < 9; ++n) {
      EXPECT_LE(rel_err(D1[n], A[n], 1.0), Tolerance<T>::identity);
    }
  }
}

TYPED_TEST(WignerDTest, IrrepsBlocksAndParity) {
  using T = TypeParam;
  std::mt19937_64 rng(10);
  const Mat3<T> R = test::random_rotation<T>(rng);
  const Irreps irreps = Irreps::parse("2x0e+1x1o+2x2e+0x3o");
  const std::vector<T> D = wigner_D<T>(irreps, R);
  const int n = irreps.dim();
  ASSERT_EQ(n, 2 + 3 + 10);
  const std::vector<T> D1 = wigner_D<T>(1, R), D2 = wigner_D<T>(2, R);
  // Blocks on the diagonal in layout order, zeros elsewhere.
  std::vector<T> expect(static_cast<std::size_t>(n * n), T(0));
  expect[0] = expect[n + 1] = T(1);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      expect[(2 + i) * n + 2 + j] = D1[i * 3 + j];
    }
  }
  for (int c = 0; c < 2; ++c) {
    const int o = 5 + 5 * c;
    for (int i = 0; i < 5; ++i) {
      for (int j = 0; j < 5; ++j) {
        expect[(o + i) * n + o + j] = D2[i * 5 + j];
      }
    }
  }
  for (int k = 0; k < n * n; ++k) {
    EXPECT_LE(rel_err(D[k], expect[k], 1.0), Tolerance<T>::identity) << "entry " << k;
  }
  // Inversion -I: parity p on each block, D^l(I) = identity.
  const Mat3<T> inversion = {-1, 0, 0, 0, -1, 0, 0, 0, -1};
  const std::vector<T> P = wigner_D<T>(Irreps::parse("1x0e+1x0o+1x1o+1x1e"), inversion);
  const std::vector<T> diag = {1, -1, -1, -1, -1, 1, 1, 1};
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) {
      EXPECT_LE(rel_err(P[i * 8 + j], i == j ? diag[i] : T(0), 1.0), Tolerance<T>::identity);
    }
  }
}

TEST(WignerD, RejectsBadInput) {
  const Mat3<double> R = rotation_from_euler(0.1, 0.2, 0.3);
  test::expect_input_error([&] { wigner_D(5, R); }, {"l = 5", "l <= 4"});
  test::expect_input_error([&] { wigner_D(-1, R); }, {"l = -1"});
  test::expect_input_error([&] { wigner_D(Irreps::parse("1x5e"), R); }, {"l = 5", "l <= 4"});
  const Mat3<double> scaled = {2, 0, 0, 0, 1, 0, 0, 0, 1};
  test::expect_input_error([&] { wigner_D(1, scaled); }, {"not orthogonal"});
  const Mat3<double> reflection = {-1, 0, 0, 0, 1, 0, 0, 0, 1};
  test::expect_input_error([&] { wigner_D(1, reflection); }, {"improper", "wigner_D(irreps, R)"});
  test::expect_input_error([] { rotation_from_quaternion(0.0, 0.0, 0.0, 0.0); }, {"zero"});
}

}  // namespace
}  // namespace fastmlip
