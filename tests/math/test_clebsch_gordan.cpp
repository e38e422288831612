// SPDX-License-Identifier: MIT
// Wigner 3j / CG tables: parity with e3nn (tests/reference/data/math/wigner_3j.json) in value
// and sparsity, invariance under rotations, orthogonality, known values, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "math/clebsch_gordan.hpp"
#include "math/wigner_d.hpp"
#include "math_test_util.hpp"

namespace fastmlip {
namespace {

using test::rel_err;
using test::report;
using test::Tolerance;

bool triangle(int a, int b, int c) { return std::abs(a - b) <= c && c <= a + b; }

TEST(WignerThreeJ, MatchesE3nnValuesAndSparsity) {
  const nlohmann::json fx = test::load_fixture("wigner_3j.json");
  const CGTable table = CGTable::build();
  int blocks = 0;
  double worst = 0;
  for (const nlohmann::json& b : fx.at("blocks")) {
    const auto l = b.at("l").get<std::vector<int>>();
    const int d2 = 2 * l[1] + 1, d3 = 2 * l[2] + 1;
    std::vector<double> expect(static_cast<std::size_t>((2 * l[0] + 1) * d2 * d3), 0.0);
    std::set<std::tuple<int, int, int>> nonzero;
    for (const nlohmann::json& z : b.at("nonzeros")) {
      const int i = z[0], j = z[1], k = z[2];
      expect[static_cast<std::size_t>((i * d2 + j) * d3 + k)] = z[3].get<double>();
      nonzero.insert({i, j, k});
    }
    const std::vector<double> ours = wigner_3j(l[0], l[1], l[2]);
    ASSERT_EQ(ours.size(), expect.size());
    for (std::size_t n = 0; n < ours.size(); ++n) {
      if (expect[n] == 0) {
        EXPECT_EQ(ours[n], 0.0) << "(" << l[0] << ", " << l[1] << ", " << l[2] << ") flat " << n;
      } else {
        const double err = rel_err(ours[n], expect[n], 0.0);
        worst = std::max(worst, err);
        EXPECT_LE(err, Tolerance<double>::fixture)
            << "(" << l[0] << ", " << l[1] << ", " << l[2] << ") flat " << n;
      }
    }
    // The sparse table holds exactly e3nn's non-zeros, with the same values.
    const CGPath& p = table.path(l[0], l[1], l[2]);
    std::set<std::tuple<int, int, int>> ours_nonzero;
    for (int e = p.begin; e < p.end; ++e) {
      const CGNonZero& z = table.entries[e];
      ours_nonzero.insert({z.i1, z.i2, z.i3});
      EXPECT_EQ(z.value, ours[static_cast<std::size_t>((z.i1 * d2 + z.i2) * d3 + z.i3)]);
    }
    EXPECT_EQ(ours_nonzero, nonzero) << "(" << l[0] << ", " << l[1] << ", " << l[2] << ")";
    ++blocks;
  }
  // Every (l1, l2, l3) <= 4 satisfying the triangle rule was compared.
  EXPECT_EQ(blocks, static_cast<int>(table.paths.size()));
  report("wigner_3j vs e3nn (relative, non-zeros)", worst);
}

TEST(WignerThreeJ, KnownValues) {
  // l = 0 couplings are identities up to normalisation: C[0][i][j] = delta_ij / sqrt(2l+1).
  for (int l = 0; l <= kMaxL; ++l) {
    const std::vector<double> c = wigner_3j(0, l, l);
    const int d = 2 * l + 1;
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j) {
        EXPECT_NEAR(c[i * d + j], i == j ? 1 / std::sqrt(double(d)) : 0.0, 1e-15);
      }
    }
  }
  // 1 x 1 -> 1 is the cross product: C = epsilon / sqrt(6), positive at (x, y, z) in e3nn's sign.
  const std::vector<double> c = wigner_3j(1, 1, 1);
  const int eps[3][3][3] = {{{0, 0, 0}, {0, 0, 1}, {0, -1, 0}},
                            {{0, 0, -1}, {0, 0, 0}, {1, 0, 0}},
                            {{0, 1, 0}, {-1, 0, 0}, {0, 0, 0}}};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 3; ++k) {
        EXPECT_NEAR(c[(i * 3 + j) * 3 + k], eps[i][j][k] / std::sqrt(6.0), 1e-15);
      }
    }
  }
  // Complex Condon-Shortley values from tables.
  EXPECT_NEAR(clebsch_gordan_complex(1, 1, 1, -1, 0, 0), 1 / std::sqrt(3.0), 1e-15);
  EXPECT_NEAR(clebsch_gordan_complex(1, 0, 1, 0, 0, 0), -1 / std::sqrt(3.0), 1e-15);
  EXPECT_NEAR(clebsch_gordan_complex(1, 0, 1, 0, 2, 0), std::sqrt(2.0 / 3.0), 1e-15);
  EXPECT_NEAR(clebsch_gordan_complex(1, 1, 1, 0, 2, 1), 1 / std::sqrt(2.0), 1e-15);
  EXPECT_NEAR(clebsch_gordan_complex(2, 1, 1, -1, 1, 0), std::sqrt(3.0 / 10.0), 1e-15);
  EXPECT_EQ(clebsch_gordan_complex(1, 0, 1, 0, 1, 0), 0.0);
  EXPECT_EQ(clebsch_gordan_complex(1, 1, 1, 1, 1, 1), 0.0);  // m1 + m2 != m3
  EXPECT_EQ(clebsch_gordan_complex(1, 0, 1, 0, 3, 0), 0.0);  // triangle
}

TEST(WignerThreeJ, ComplexCoefficientsAreUnitary) {
  // sum over m1, m2 of <l1 m1 l2 m2 | L M><l1 m1 l2 m2 | L' M'> = delta_LL' delta_MM'.
  for (int l1 = 0; l1 <= 2; ++l1) {
    for (int l2 = 0; l2 <= 2; ++l2) {
      for (int L = std::abs(l1 - l2); L <= l1 + l2; ++L) {
        for (int Lp = std::abs(l1 - l2); Lp <= l1 + l2; ++Lp) {
          for (int M = -L; M <= L; ++M) {
            for (int Mp = -Lp; Mp <= Lp; ++Mp) {
              double s = 0;
              for (int m1 = -l1; m1 <= l1; ++m1) {
                for (int m2 = -l2; m2 <= l2; ++m2) {
                  s += clebsch_gordan_complex(l1, m1, l2, m2, L, M) *
                       clebsch_gordan_complex(l1, m1, l2, m2, Lp, Mp);
                }
              }
              EXPECT_NEAR(s, (L == Lp && M == Mp) ? 1.0 : 0.0, 1e-14);
            }
          }
        }
      }
    }
  }
}

TEST(WignerThreeJ, OrthogonalAndComplete) {
  const CGTable table = CGTable::build();
  // Orthogonality: sum_ij C^{l1 l2 L}_{ijk} C^{l1 l2 L'}_{ijk'} = delta_LL' delta_kk' / (2L + 1).
  for (int l1 = 0; l1 <= kMaxL; ++l1) {
    for (int l2 = 0; l2 <= kMaxL; ++l2) {
      for (int L = 0; L <= kMaxL; ++L) {
        for (int Lp = 0; Lp <= kMaxL; ++Lp) {
          if (!triangle(l1, l2, L) || !triangle(l1, l2, Lp)) {
            continue;
          }
          const std::vector<double> a = table.dense(l1, l2, L), b = table.dense(l1, l2, Lp);
          const int d12 = (2 * l1 + 1) * (2 * l2 + 1), dL = 2 * L + 1, dLp = 2 * Lp + 1;
          for (int k = 0; k < dL; ++k) {
            for (int kp = 0; kp < dLp; ++kp) {
              double s = 0;
              for (int ij = 0; ij < d12; ++ij) {
                s += a[ij * dL + k] * b[ij * dLp + kp];
              }
              EXPECT_NEAR(s, (L == Lp && k == kp) ? 1.0 / dL : 0.0, 1e-15);
            }
          }
        }
      }
    }
  }
  // Completeness where every output l3 = |l1-l2|..l1+l2 is in the table:
  // sum_{L, k} (2L + 1) C_{ijk} C_{i'j'k} = delta_ii' delta_jj'.
  for (int l1 = 0; l1 <= kMaxL; ++l1) {
    for (int l2 = 0; l1 + l2 <= kMaxL; ++l2) {
      const int d1 = 2 * l1 + 1, d2 = 2 * l2 + 1;
      std::vector<double> gram(static_cast<std::size_t>(d1 * d2 * d1 * d2), 0.0);
      for (int L = std::abs(l1 - l2); L <= l1 + l2; ++L) {
        const std::vector<double> c = table.dense(l1, l2, L);
        const int dL = 2 * L + 1;
        for (int a = 0; a < d1 * d2; ++a) {
          for (int b = 0; b < d1 * d2; ++b) {
            for (int k = 0; k < dL; ++k) {
              gram[a * d1 * d2 + b] += dL * c[a * dL + k] * c[b * dL + k];
            }
          }
        }
      }
      for (int a = 0; a < d1 * d2; ++a) {
        for (int b = 0; b < d1 * d2; ++b) {
          EXPECT_NEAR(gram[a * d1 * d2 + b], a == b ? 1.0 : 0.0, 1e-14) << l1 << " x " << l2;
        }
      }
    }
  }
}

template <class T>
class CGInvarianceTest : public ::testing::Test {};
TYPED_TEST_SUITE(CGInvarianceTest, test::FloatTypes);

TYPED_TEST(CGInvarianceTest, InvariantUnderRandomRotations) {
  // sum_{i'j'k'} D1[i i'] D2[j j'] D3[k k'] C[i'j'k'] = C[ijk]: D1 x D2 contracted with C equals
  // C contracted with D3, for every path, in the precision of T.
  using T = TypeParam;
  const CGTable table = CGTable::build();
  std::mt19937_64 rng(77);
  double worst = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const Mat3<T> R = test::random_rotation<T>(rng);
    std::vector<std::vector<T>> D;
    for (int l = 0; l <= kMaxL; ++l) {
      D.push_back(wigner_D<T>(l, R));
    }
    for (const CGPath& p : table.paths) {
      const int d1 = 2 * p.l1 + 1, d2 = 2 * p.l2 + 1, d3 = 2 * p.l3 + 1;
      const std::vector<double> c = table.dense(p.l1, p.l2, p.l3);
      // Rotate the sparse tensor: out[ijk] = sum over non-zeros C[i'j'k'] D1[i i'] D2[j j'] D3[k k'].
      std::vector<T> rotated(c.size(), T(0));
      for (int e = p.begin; e < p.end; ++e) {
        const CGNonZero& z = table.entries[e];
        const T v = static_cast<T>(z.value);
        for (int i = 0; i < d1; ++i) {
          for (int j = 0; j < d2; ++j) {
            const T dij = D[p.l1][i * d1 + z.i1] * D[p.l2][j * d2 + z.i2] * v;
            for (int k = 0; k < d3; ++k) {
              rotated[(i * d2 + j) * d3 + k] += dij * D[p.l3][k * d3 + z.i3];
            }
          }
        }
      }
      for (std::size_t n = 0; n < c.size(); ++n) {
        const double err = rel_err(rotated[n], c[n], 1.0);
        worst = std::max(worst, err);
        EXPECT_LE(err, Tolerance<T>::identity) << "(" << p.l1 << ", " << p.l2 << ", " << p.l3 << ")";
      }
    }
  }
  report(std::string("CG invariance under rotation, ") + test::dtype_name<T>(), worst);
}

TEST(CGTable, StructureAndSparsity) {
  const CGTable table = CGTable::build();
  EXPECT_EQ(table.lmax, kMaxL);
  int expected_paths = 0, dense = 0;
  for (int l1 = 0; l1 <= kMaxL; ++l1) {
    for (int l2 = 0; l2 <= kMaxL; ++l2) {
      for (int l3 = 0; l3 <= kMaxL; ++l3) {
        if (triangle(l1, l2, l3)) {
          const int i = table.find(l1, l2, l3);
          ASSERT_EQ(i, expected_paths);  // lexicographic order
          EXPECT_EQ(table.paths[i].l1, l1);
          EXPECT_EQ(table.paths[i].l3, l3);
          ++expected_paths;
          dense += (2 * l1 + 1) * (2 * l2 + 1) * (2 * l3 + 1);
        } else {
          EXPECT_EQ(table.find(l1, l2, l3), -1);
        }
      }
    }
  }
  EXPECT_EQ(static_cast<int>(table.paths.size()), expected_paths);
  EXPECT_EQ(table.paths.front().begin, 0);
  EXPECT_EQ(table.paths.back().end, static_cast<int>(table.entries.size()));
  for (std::size_t i = 0; i + 1 < table.paths.size(); ++i) {
    EXPECT_EQ(table.paths[i].end, table.paths[i + 1].begin);
  }
  for (const CGPath& p : table.paths) {
    EXPECT_GT(p.num_nonzero(), 0);
    for (int e = p.begin; e < p.end; ++e) {
      const CGNonZero& z = table.entries[e];
      EXPECT_TRUE(z.i1 >= 0 && z.i1 <= 2 * p.l1 && z.i2 >= 0 && z.i2 <= 2 * p.l2 && z.i3 >= 0 &&
                  z.i3 <= 2 * p.l3);
      EXPECT_GT(std::abs(z.value), kCGZeroTolerance);
    }
    EXPECT_EQ(table.dense(p.l1, p.l2, p.l3), wigner_3j(p.l1, p.l2, p.l3));
  }
  // The seed paper reports under 20% non-zeros; in the real basis it is about that.
  const double fill = double(table.entries.size()) / dense;
  std::printf("[ measured ] CG table l <= %d: %zu paths, %zu non-zeros of %d (%.1f%%)\n", kMaxL,
              table.paths.size(), table.entries.size(), dense, 100 * fill);
  EXPECT_LT(fill, 0.25);

  // A smaller table is a prefix-free subset with the same values.
  const CGTable small = CGTable::build(2);
  EXPECT_EQ(small.find(2, 2, 4), -1);
  EXPECT_EQ(small.dense(1, 2, 1), table.dense(1, 2, 1));
}

TEST(CGTable, IrrepPathsApplyTheParityRule) {
  const CGTable table = CGTable::build(3);
  const CGPath& p = table.path(Irrep{1, -1}, Irrep{2, 1}, Irrep{3, -1});
  EXPECT_EQ(p.l1, 1);
  EXPECT_EQ(p.l2, 2);
  EXPECT_EQ(p.l3, 3);
  test::expect_input_error(
      [&] {
        table.path(Irrep{1, -1}, Irrep{2, 1}, Irrep{3, 1});
      },
      {"1o x 2e -> 3e", "parity"});
  test::expect_input_error([&] { table.path(Irrep{1, -1}, Irrep{1, -1}, Irrep{3, 1}); }, {"triangle"});
}

TEST(CGTable, RejectsUnsupportedL) {
  test::expect_input_error([] { CGTable::build(5); }, {"lmax 5", "l <= 4"});
  test::expect_input_error([] { CGTable::build(-1); }, {"lmax -1"});
  test::expect_input_error([] { wigner_3j(5, 1, 4); }, {"l1 = 5", "l <= 4"});
  test::expect_input_error([] { wigner_3j(1, 1, 7); }, {"l3 = 7", "l <= 4"});
  test::expect_input_error([] { wigner_3j(1, -1, 1); }, {"l2 = -1"});
  test::expect_input_error([] { wigner_3j(1, 1, 3); }, {"(1, 1, 3)", "triangle"});
  test::expect_input_error([] { clebsch_gordan_complex(6, 0, 1, 0, 6, 0); }, {"j1 = 6"});
  const CGTable table = CGTable::build(2);
  // Lookups outside the table never read out of bounds: -1 from find, InputError from path.
  EXPECT_EQ(table.find(3, 1, 2), -1);
  EXPECT_EQ(table.find(-1, 1, 1), -1);
  EXPECT_EQ(table.find(100, 100, 100), -1);
  test::expect_input_error([&] { table.path(3, 1, 2); }, {"(3, 1, 2)", "lmax 2"});
  test::expect_input_error([&] { table.dense(0, 4, 4); }, {"(0, 4, 4)", "lmax 2"});
  EXPECT_EQ(CGTable().find(0, 0, 0), -1);  // a default (empty) table finds nothing
}

}  // namespace
}  // namespace fastmlip
