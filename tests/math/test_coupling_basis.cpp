// SPDX-License-Identifier: MIT
// Symmetric coupling (U) tensors of MACE's symmetric contraction (math/coupling_basis.hpp):
// the dimension K against hand counts and against the rank of mace-torch's own U; equivariance
// under random rotations and inversion; permutation symmetry; orthonormality; that every
// mace-torch U column (tests/reference/data/kernels/symmetric_contraction.json) lies in our
// span; and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "math/coupling_basis.hpp"
#include "math/limits.hpp"
#include "math/wigner_d.hpp"
#include "math_test_util.hpp"

namespace fastmlip {
namespace {

using test::report;

// A dense U with its leading axis made explicit: [M][n^nu][K].
struct Dense {
  int M = 1, n = 0, nu = 0, K = 0;
  long long inner = 1;  // n^nu
  std::vector<double> v;
  double at(int m, long long i, int k) const { return v[static_cast<std::size_t>((m * inner + i) * K + k)]; }
};

Dense dense(const CouplingBasis& b, const Irrep& out, int num_ell, int nu) {
  Dense d;
  d.M = out.dim();
  d.n = num_ell;
  d.nu = nu;
  d.K = b.num_params();
  for (int j = 0; j < nu; ++j) {
    d.inner *= num_ell;
  }
  // The layout contract: mace-torch's shape, leading axis squeezed for L = 0.
  std::vector<int> expect;
  if (d.M > 1) {
    expect.push_back(d.M);
  }
  for (int j = 0; j < nu; ++j) {
    expect.push_back(num_ell);
  }
  expect.push_back(d.K);
  EXPECT_EQ(b.shape, expect);
  EXPECT_EQ(b.U.size(), static_cast<std::size_t>(d.M * d.inner * d.K));
  d.v = b.U;
  return d;
}

// U'[m, i_1..i_nu, k] = sum_j U[m, j_1..j_nu, k] D[j_1 i_1] .. D[j_nu i_nu]: one axis at a time.
std::vector<double> apply_inputs(const Dense& u, const std::vector<double>& D) {
  std::vector<double> cur = u.v, next(cur.size());
  long long after = u.K;  // stride of the axis being transformed
  for (int axis = u.nu - 1; axis >= 0; --axis) {
    std::fill(next.begin(), next.end(), 0.0);
    const long long block = after * u.n;
    for (long long base = 0; base < static_cast<long long>(cur.size()); base += block) {
      for (int j = 0; j < u.n; ++j) {
        for (int i = 0; i < u.n; ++i) {
          const double d = D[static_cast<std::size_t>(j * u.n + i)];
          if (d == 0.0) {
            continue;
          }
          const double* src = cur.data() + base + j * after;
          double* dst = next.data() + base + i * after;
          for (long long r = 0; r < after; ++r) {
            dst[r] += d * src[r];
          }
        }
      }
    }
    std::swap(cur, next);
    after = block;
  }
  return cur;
}

// Largest |U (D (x) .. (x) D) - D_L U| for the O(3) element R (proper or improper).
double equivariance_error(const Dense& u, const Irreps& irreps, const Irrep& out, const Mat3<double>& R) {
  const auto D = wigner_D(irreps, R);
  const auto DL = wigner_D(Irreps({MulIrrep{1, out}}), R);
  const auto lhs = apply_inputs(u, D);
  double err = 0;
  for (int m = 0; m < u.M; ++m) {
    for (long long i = 0; i < u.inner; ++i) {
      for (int k = 0; k < u.K; ++k) {
        double rhs = 0;
        for (int mp = 0; mp < u.M; ++mp) {
          rhs += DL[static_cast<std::size_t>(m * u.M + mp)] * u.at(mp, i, k);
        }
        err = std::max(err, std::abs(lhs[static_cast<std::size_t>((m * u.inner + i) * u.K + k)] - rhs));
      }
    }
  }
  return err;
}

// Largest |U[.., i_a, i_{a+1}, ..] - U[.., i_{a+1}, i_a, ..]| over adjacent swaps, which
// generate every permutation.
double symmetry_error(const Dense& u) {
  std::vector<long long> stride(u.nu, 1);  // of each input axis in the flat index i
  for (int a = u.nu - 2; a >= 0; --a) {
    stride[a] = stride[a + 1] * u.n;
  }
  double err = 0;
  for (int a = 0; a + 1 < u.nu; ++a) {
    for (long long i = 0; i < u.inner; ++i) {
      const long long da = (i / stride[a]) % u.n, db = (i / stride[a + 1]) % u.n;
      const long long j = i + (db - da) * stride[a] + (da - db) * stride[a + 1];
      for (int m = 0; m < u.M; ++m) {
        for (int k = 0; k < u.K; ++k) {
          err = std::max(err, std::abs(u.at(m, i, k) - u.at(m, j, k)));
        }
      }
    }
  }
  return err;
}

// Largest |sum_i U[m, i, k] U[m', i, k'] - delta_mm' delta_kk'|.
double orthonormality_error(const Dense& u) {
  double err = 0;
  for (int m = 0; m < u.M; ++m) {
    for (int mp = 0; mp < u.M; ++mp) {
      for (int k = 0; k < u.K; ++k) {
        for (int kp = 0; kp < u.K; ++kp) {
          double s = 0;
          for (long long i = 0; i < u.inner; ++i) {
            s += u.at(m, i, k) * u.at(mp, i, kp);
          }
          err = std::max(err, std::abs(s - (m == mp && k == kp ? 1.0 : 0.0)));
        }
      }
    }
  }
  return err;
}

// Hand counts of Hom_O(3)(Sym^nu V, L), each from a known polynomial identity, so that the
// character formula is checked against something other than itself.
TEST(CouplingBasis, DimensionMatchesHandCounts) {
  struct Case {
    const char* irreps;
    const char* out;
    int nu, K;
  };
  const Case cases[] = {
      {"1o", "0e", 2, 1},     // |v|^2
      {"1o", "2e", 2, 1},     // v v^T - |v|^2/3
      {"1o", "1e", 2, 0},     // v x v = 0: the pseudovector is antisymmetric
      {"1o", "1o", 2, 0},     // parity
      {"1o", "1o", 3, 1},     // |v|^2 v
      {"1o", "2o", 3, 0},     // Sym^3(1) = 3 + 1
      {"1o", "3o", 3, 1},     // (the l = 3 part of v v v)
      {"1o", "0e", 4, 1},     // |v|^4
      {"1o", "4e", 4, 1},     // Sym^4(1) = 4 + 2 + 0
      {"1o", "3e", 4, 0},     // parity, and no l = 3 in Sym^4(1)
      {"2x0e", "0e", 2, 3},   // a^2, ab, b^2: two copies of 0e are two blocks
      {"0e+1o", "0e", 3, 2},  // s^3, s |v|^2
      {"0e+1o", "1o", 3, 2},  // s^2 v, |v|^2 v
      {"2e", "0e", 3, 1},     // tr(A^3) of a traceless symmetric A
      {"2e", "1e", 3, 0},     // Sym^3(2) = 6 + 4 + 3 + 2 + 0
      {"2e", "3e", 3, 1},     // (the l = 3 part of Sym^3(2))
      {"1o+1e", "0o", 2, 1},  // v . w of a vector and a pseudovector
      {"1o+1e", "0e", 2, 2},  // |v|^2, |w|^2
  };
  for (const Case& c : cases) {
    const Irreps irreps = Irreps::parse(c.irreps);
    const Irrep out = Irrep::parse(c.out);
    EXPECT_EQ(symmetric_coupling_dimension(irreps, out, c.nu), c.K)
        << c.irreps << " -> " << c.out << " nu " << c.nu;
    const CouplingBasis b = symmetric_coupling_basis(irreps, out, c.nu);
    EXPECT_EQ(b.num_params(), c.K) << c.irreps << " -> " << c.out << " nu " << c.nu;
  }
}

// Every basis: K from the character formula, equivariant under proper and improper rotations,
// symmetric, orthonormal. Cases: MACE's usual coupling irreps (natural parity) at nu = 1..3,
// nu = 4 on smaller ones, mixed parities and repeated irreps (distinct blocks of one l).
TEST(CouplingBasis, EquivariantSymmetricOrthonormal) {
  struct Case {
    const char* irreps;
    std::vector<const char*> outs;
    std::vector<int> nus;
  };
  const std::vector<Case> cases = {
      {"0e+1o+2e+3o", {"0e", "1o", "2e", "3o"}, {1, 2, 3}},
      {"0e+1o+2e", {"0e", "1o", "2e"}, {4}},
      {"0e+1o+1e+2o", {"0e", "0o", "1o", "1e", "2o"}, {2, 3}},
      {"2x1o+4e", {"0e", "4e"}, {2, 3}},
      {"2x1o+4e", {"3o"}, {3}},
      // Sectors whose span needs more than one leg order of the coupling paths (intermediates
      // stop at l = 4): Sym^2(3o) x 3o' -> 3o, and 1o x 4e x 1e -> 4o, where 1 x 4 -> 5 is cut.
      {"2x3o", {"1o", "3o"}, {3}},
      {"1o+4e+1e", {"4o"}, {3}},
      {"1o", {"0e", "2e", "4e"}, {4}},
  };
  std::mt19937_64 rng(20240611);
  double worst_eq = 0, worst_sym = 0, worst_orth = 0;
  for (const Case& c : cases) {
    const Irreps irreps = Irreps::parse(c.irreps);
    for (const char* o : c.outs) {
      const Irrep out = Irrep::parse(o);
      for (int nu : c.nus) {
        const CouplingBasis b = symmetric_coupling_basis(irreps, out, nu);
        const Dense u = dense(b, out, irreps.dim(), nu);
        const std::string what = std::string(c.irreps) + " -> " + o + " nu " + std::to_string(nu);
        EXPECT_EQ(u.K, symmetric_coupling_dimension(irreps, out, nu)) << what;
        EXPECT_GT(u.K, 0) << what << ": every case here admits tensors, else the checks are empty";
        for (int r = 0; r < 3; ++r) {
          Mat3<double> R = test::random_rotation<double>(rng);
          if (r == 2) {
            for (double& x : R) {
              x = -x;  // an improper element: checks the parity of every block
            }
          }
          const double e = equivariance_error(u, irreps, out, R);
          worst_eq = std::max(worst_eq, e);
          EXPECT_LE(e, 1e-12) << what << " rotation " << r;
        }
        const double s = symmetry_error(u), n = orthonormality_error(u);
        worst_sym = std::max(worst_sym, s);
        worst_orth = std::max(worst_orth, n);
        EXPECT_EQ(s, 0.0) << what;  // the dense U is expanded from one value per sorted tuple
        EXPECT_LE(n, 1e-12) << what;
      }
    }
  }
  report("coupling basis: equivariance |U D^nu - D_L U| (rotations and inversion)", worst_eq);
  report("coupling basis: permutation symmetry", worst_sym);
  report("coupling basis: orthonormality |U U^T - I|", worst_orth);
}

TEST(CouplingBasis, IsDeterministic) {
  const Irreps irreps = Irreps::parse("0e+1o+2e+3o");
  const CouplingBasis a = symmetric_coupling_basis(irreps, Irrep::parse("2e"), 3);
  const CouplingBasis b = symmetric_coupling_basis(irreps, Irrep::parse("2e"), 3);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_TRUE(a.U == b.U);
}

// mace-torch's U_matrix_nu (the committed fixture) stacks every ordered coupling path; only
// its symmetrisation (1/nu!) sum_sigma U o sigma acts on x (x) .. (x) x. Each symmetrised column
// must lie in our span (so our basis represents every mace-torch model), and they must span
// all of it (so ours has no direction mace-torch's lacks): ranks equal, K_ours <= K_mace.
TEST(CouplingBasis, SpansMaceTorchBases) {
  std::ifstream in(FASTMLIP_REFERENCE_DATA_DIR "/kernels/symmetric_contraction.json");
  ASSERT_TRUE(in.good()) << "missing fixture; regenerate with tests/reference/make_kernel_fixtures.py";
  const auto data = nlohmann::json::parse(in);
  double worst = 0;
  int compared = 0;
  for (const auto& c : data["symmetric_contraction"]) {
    const Irreps in_irreps = Irreps::parse(c["irreps_in"].get<std::string>());
    const Irreps out_irreps = Irreps::parse(c["irreps_out"].get<std::string>());
    std::vector<MulIrrep> ones;
    for (const MulIrrep& e : in_irreps) {
      ones.push_back({1, e.ir});
    }
    const Irreps coupling(ones);
    const int n = coupling.dim();
    for (std::size_t o = 0; o < out_irreps.size(); ++o) {
      const Irrep out = out_irreps[o].ir;
      for (int nu = 1; nu <= c["correlation"].get<int>(); ++nu) {
        const auto& uj = c["contractions"][o]["U"][std::to_string(nu)];
        const auto shape = uj["shape"].get<std::vector<int>>();
        Dense mace;
        mace.M = out.dim();
        mace.n = n;
        mace.nu = nu;
        mace.K = shape.back();
        for (int j = 0; j < nu; ++j) {
          mace.inner *= n;
        }
        mace.v.assign(static_cast<std::size_t>(mace.M * mace.inner * mace.K), 0.0);
        for (const auto& nz : uj["nonzeros"]) {
          mace.v[nz[0].get<std::size_t>()] = nz[1].get<double>();
        }
        const Dense ours = dense(symmetric_coupling_basis(coupling, out, nu), out, n, nu);
        if (nu == 1) {  // both are the identity on the copies of L (documented)
          ASSERT_EQ(ours.v.size(), mace.v.size());
          for (std::size_t i = 0; i < ours.v.size(); ++i) {
            EXPECT_NEAR(ours.v[i], mace.v[i], 1e-15) << out.str() << " nu 1 @" << i;
          }
        }
        // Symmetrise mace-torch's columns: average over the orderings of each index tuple.
        Dense sym = mace;
        std::vector<int> idx(nu);
        for (long long i = 0; i < mace.inner; ++i) {
          long long rest = i;
          for (int j = nu - 1; j >= 0; --j) {
            idx[j] = static_cast<int>(rest % n);
            rest /= n;
          }
          std::sort(idx.begin(), idx.end());
          std::vector<long long> orderings;
          do {
            long long f = 0;
            for (int x : idx) {
              f = f * n + x;
            }
            orderings.push_back(f);
          } while (std::next_permutation(idx.begin(), idx.end()));
          for (int m = 0; m < mace.M; ++m) {
            for (int k = 0; k < mace.K; ++k) {
              double s = 0;
              for (long long f : orderings) {
                s += mace.at(m, f, k);
              }
              sym.v[static_cast<std::size_t>((m * mace.inner + i) * mace.K + k)] = s / orderings.size();
            }
          }
        }
        // Project on ours (columns orthogonal with squared norm 2L+1), measure the residual
        // relative to the column's norm before symmetrisation.
        std::vector<std::vector<double>> coef(ours.K, std::vector<double>(mace.K, 0.0));
        for (int j = 0; j < mace.K; ++j) {
          double norm2 = 0;
          for (int k = 0; k < ours.K; ++k) {
            double dot = 0;
            for (int m = 0; m < mace.M; ++m) {
              for (long long i = 0; i < mace.inner; ++i) {
                dot += ours.at(m, i, k) * sym.at(m, i, j);
              }
            }
            coef[k][j] = dot / out.dim();
          }
          double res2 = 0;
          for (int m = 0; m < mace.M; ++m) {
            for (long long i = 0; i < mace.inner; ++i) {
              double r = sym.at(m, i, j);
              for (int k = 0; k < ours.K; ++k) {
                r -= coef[k][j] * ours.at(m, i, k);
              }
              res2 += r * r;
              norm2 += mace.at(m, i, j) * mace.at(m, i, j);
            }
          }
          const double res = std::sqrt(res2 / norm2);
          worst = std::max(worst, res);
          EXPECT_LE(res, 1e-12) << out.str() << " nu " << nu << " mace column " << j;
        }
        // rank(coef) == K_ours: Gaussian elimination with partial pivoting; the coefficients
        // are O(0.1..1) and a lost direction would leave an exact zero pivot.
        auto a = coef;
        int rank = 0;
        for (int col = 0; col < mace.K && rank < ours.K; ++col) {
          int piv = rank;
          for (int r = rank; r < ours.K; ++r) {
            if (std::abs(a[r][col]) > std::abs(a[piv][col])) {
              piv = r;
            }
          }
          if (std::abs(a[piv][col]) < 1e-9) {
            continue;
          }
          std::swap(a[piv], a[rank]);
          for (int r = rank + 1; r < ours.K; ++r) {
            const double f = a[r][col] / a[rank][col];
            for (int cc = col; cc < mace.K; ++cc) {
              a[r][cc] -= f * a[rank][cc];
            }
          }
          ++rank;
        }
        EXPECT_EQ(rank, ours.K) << out.str() << " nu " << nu;
        EXPECT_LE(ours.K, mace.K) << out.str() << " nu " << nu;
        std::printf("[ K ] '%s' -> %s nu %d: ours %d, mace-torch %d\n", coupling.str().c_str(),
                    out.str().c_str(), nu, ours.K, mace.K);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 1 + 4 + 6 + 9 + 3);  // every U of the five fixture contractions
  report("coupling basis: symmetrised mace-torch columns outside our span", worst);
}

// The K of our bases for MACE's usual shapes. Each equals the rank of mace-torch 0.3.13's
// symmetrised U_matrix_nu, measured with the pinned venv (tests/reference/setup-venv.sh) for
// nu = 1..4; mace-torch's own K (its column count) is in the comments. At nu = 4 mace-torch
// keeps only natural-parity intermediates (filter_ir_mid); for these natural-parity inputs
// that loses nothing, so the ranks still agree.
TEST(CouplingBasis, KForMaceShapes) {
  struct Case {
    const char* irreps;
    const char* out;
    std::vector<int> K;  // nu = 1, 2, 3, 4
  };
  const Case cases[] = {
      {"0e+1o+2e+3o", "0e", {1, 4, 8, 23}},   // mace-torch K: 1, 4, 23, 158
      {"0e+1o+2e+3o", "1o", {1, 3, 12, 31}},  // 1, 6, 51, 284
      {"0e+1o+2e+3o", "2e", {1, 5, 14, 46}},  // 1, 7, 65, 358
      {"0e+1o+2e+3o", "3o", {1, 3, 15, 44}},  // 1, 6, 65, 372
      {"0e+1o+2e", "0e", {1, 3, 5, 9}},       // 1, 3, 11, 46
      {"0e+1o+2e", "1o", {1, 2, 5, 9}},       // 1, 4, 21, 76
      {"0e+1o+2e", "2e", {1, 3, 6, 13}},      // 1, 4, 23, 85
      {"0e+1o", "0e", {1, 2, 2, 3}},          // 1, 2, 4, 9
      {"0e+1o", "1o", {1, 1, 2, 2}},          // 1, 2, 6, 12
  };
  for (const Case& c : cases) {
    for (int nu = 1; nu <= 4; ++nu) {
      EXPECT_EQ(symmetric_coupling_dimension(Irreps::parse(c.irreps), Irrep::parse(c.out), nu), c.K[nu - 1])
          << c.irreps << " -> " << c.out << " nu " << nu;
    }
  }
}

TEST(CouplingBasis, ContractionHelperLayout) {
  const Irreps in = Irreps::parse("8x0e+8x1o+8x2e");
  const Irreps out = Irreps::parse("8x0e+8x1o");
  const SymmetricContractionBasis b = symmetric_contraction_basis(in, out, 3);
  ASSERT_EQ(b.U.size(), 2u);
  ASSERT_EQ(b.shapes.size(), 2u);
  EXPECT_EQ(b.shapes[0], (std::vector<std::vector<int>>{{9, 1}, {9, 9, 3}, {9, 9, 9, 5}}));
  EXPECT_EQ(b.shapes[1], (std::vector<std::vector<int>>{{3, 9, 1}, {3, 9, 9, 2}, {3, 9, 9, 9, 5}}));
  // Same values as the single-basis call on the multiplicity-one coupling irreps.
  EXPECT_TRUE(b.U[1][2] == symmetric_coupling_basis(Irreps::parse("0e+1o+2e"), Irrep::parse("1o"), 3).U);
}

TEST(CouplingBasis, BadInputIsAClearError) {
  const Irreps irreps = Irreps::parse("0e+1o+2e");
  test::expect_input_error([&] { symmetric_coupling_basis(irreps, Irrep::parse("0e"), 0); },
                           {"nu = 0", "1..4"});
  test::expect_input_error([&] { symmetric_coupling_basis(irreps, Irrep::parse("0e"), 5); },
                           {"nu = 5", "1..4"});
  test::expect_input_error([&] { symmetric_coupling_dimension(irreps, Irrep::parse("0e"), 5); }, {"nu = 5"});
  test::expect_input_error([&] { symmetric_coupling_basis(Irreps::parse("0e+5o"), Irrep::parse("1o"), 2); },
                           {"5o", "l <= 4"});
  test::expect_input_error([&] { symmetric_coupling_basis(irreps, Irrep::parse("5o"), 2); },
                           {"l = 5", "l <= 4"});
  test::expect_input_error([&] { symmetric_coupling_basis(Irreps(), Irrep::parse("0e"), 2); }, {"empty"});
  // 25^4 * 9 * K values: far beyond any model; refused before anything is built, and before the
  // character sums when one basis tensor alone is too large (512^4 here).
  test::expect_input_error(
      [&] { symmetric_coupling_basis(Irreps::parse("128x0e+128x1o"), Irrep::parse("0e"), 4); },
      {"limit", "per basis tensor"});
  test::expect_input_error(
      [&] { symmetric_coupling_basis(Irreps::parse("0e+1o+2e+3o+4e"), Irrep::parse("4e"), 4); },
      {"limit", "nu = 4"});
  // No tensor of order 1 maps 0e+1o to 1e: the contraction helper says which output to drop.
  test::expect_input_error(
      [&] { symmetric_contraction_basis(Irreps::parse("4x0e+4x1o"), Irreps::parse("4x1e"), 2); },
      {"1e", "order 1"});
  test::expect_input_error([&] { symmetric_contraction_basis(irreps, irreps, 5); }, {"correlation 5"});
  // K = 0 is a valid answer of the single-basis call: shape [.., 0], no values.
  const CouplingBasis none = symmetric_coupling_basis(Irreps::parse("0e+1o"), Irrep::parse("1e"), 2);
  EXPECT_EQ(none.num_params(), 0);
  EXPECT_EQ(none.shape, (std::vector<int>{3, 4, 4, 0}));
  EXPECT_TRUE(none.U.empty());
}

}  // namespace
}  // namespace fastmlip
