// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../common/kernel_fixtures.hpp"
#include "../common/sanitized.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/reference/symmetric_contraction_ref.hpp"
#include "kernels/symmetric_contraction_kokkos.hpp"
#include "math/coupling_basis.hpp"
#include "math/wigner_d.hpp"

namespace fastmlip::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using Nested = std::vector<std::vector<std::vector<double>>>;

// One mace-torch SymmetricContraction from the fixture file, in our types.
struct Case {
  SymmetricContraction sc;
  Nested U, W;
  int num_elements;
  std::vector<int> species;
  std::vector<double> x;  // e3nn flat layout [nodes, dim_in]
  std::vector<double> out;
};

std::vector<Case> cases() {
  const auto data = test::load_kernel_fixture(FASTMLIP_REFERENCE_DATA_DIR, "symmetric_contraction.json");
  std::vector<Case> out;
  for (const auto& c : data["symmetric_contraction"]) {
    const int corr = c["correlation"].get<int>();
    auto [U, W, shapes] = test::mace_contraction_data(c);
    Case k{SymmetricContraction::from_mace(Irreps::parse(c["irreps_in"].get<std::string>()),
                                           Irreps::parse(c["irreps_out"].get<std::string>()), corr, U, shapes),
           U, W, c["num_elements"].get<int>(), c["species"].get<std::vector<int>>(), {},
           c["out"].get<std::vector<double>>()};
    // mace-torch feeds x as [nodes, channels, ell]; ours is e3nn's flat layout.
    const auto xm = c["x"].get<std::vector<double>>();
    const int C = k.sc.channels, L = k.sc.num_ell, N = static_cast<int>(k.species.size());
    k.x.assign(static_cast<std::size_t>(N) * k.sc.dim_in(), 0.0);
    for (int n = 0; n < N; ++n) {
      for (int ch = 0; ch < C; ++ch) {
        for (int i = 0; i < L; ++i) {
          k.x[n * k.sc.dim_in() + k.sc.ell_offset[i] + ch * k.sc.ell_stride[i]] = xm[(n * C + ch) * L + i];
        }
      }
    }
    out.push_back(std::move(k));
  }
  return out;
}

template <class T>
Kokkos::View<T**, Kokkos::LayoutRight, Exec> matrix(const std::vector<double>& v, int rows, int cols) {
  Kokkos::View<T**, Kokkos::LayoutRight, Exec> m("m", rows, cols);
  for (std::size_t i = 0; i < v.size(); ++i) {
    m.data()[i] = static_cast<T>(v[i]);
  }
  return m;
}

Kokkos::View<int*, Exec> species_view(const std::vector<int>& s) {
  Kokkos::View<int*, Exec> v("species", s.size());
  std::copy(s.begin(), s.end(), v.data());
  return v;
}

TEST(SymmetricContraction, ReferenceAndKokkosMatchMaceTorch) {
  const auto all = cases();
  ASSERT_EQ(all.size(), 5u);
  for (const auto& k : all) {
    const int N = static_cast<int>(k.species.size());
    std::vector<double> ref(k.out.size());
    reference::compute_symmetric_contraction(k.sc, k.U, k.W, N, k.species.data(), k.x.data(), ref.data());
    SymmetricContractionKokkos<Exec, double> kk(k.sc);
    kk.set_weights(k.W, k.num_elements);
    auto out = matrix<double>(std::vector<double>(k.out.size(), 777.0), N, k.sc.dim_out());
    kk.compute(species_view(k.species), matrix<double>(k.x, N, k.sc.dim_in()), out);
    double scale = 0;
    for (double v : k.out) {
      scale = std::max(scale, std::abs(v));
    }
    for (std::size_t i = 0; i < k.out.size(); ++i) {
      EXPECT_NEAR(ref[i], k.out[i], 1e-12 * scale) << k.sc.irreps_out.str() << " corr " << k.sc.correlation << " @" << i;
      EXPECT_NEAR(out.data()[i], k.out[i], 1e-12 * scale) << k.sc.irreps_out.str() << " corr " << k.sc.correlation << " @" << i;
    }
  }
}

// Work per node and channel: mace-torch contracts the dense U with the weights (one
// multiply-add per element of U, the seed's ~185 MFLOP per node at 128 channels); we build each
// monomial once and touch each folded non-zero once.
TEST(SymmetricContraction, SparseFormDoesFarLessWorkThanDenseU) {
  const auto all = cases();
  const auto& k = all[2];  // MACE-MP medium shape (0e+1o+2e+3o in, 0e+1o out), correlation 3
  long long dense = 0;
  for (const auto& per_o : k.U) {
    for (const auto& u : per_o) {
      dense += static_cast<long long>(u.size());
    }
  }
  const long long sparse = static_cast<long long>(k.sc.monomials.size() + k.sc.entries.size());
  std::printf("symmetric contraction work per node-channel: dense U %lld, monomials + entries %lld (%.0fx)\n", dense,
              sparse, static_cast<double>(dense) / sparse);
  EXPECT_GT(dense, 100 * sparse);
}

// The prefix tree keeps exactly the monomials some entry reads and their prefixes, parents before
// children and siblings in runs (the reverse walks rely on both). MACE-MP small's contractions
// (0e+1o+2e+3o in, 0e out, correlation 3) read 165 of the 968 sorted tuples; the medium's
// (0e+1o out) about half.
TEST(SymmetricContraction, TreeHoldsOnlyTheMonomialsEntriesReadAndTheirPrefixes) {
  const Irreps in = Irreps::parse("3x0e+3x1o+3x2e+3x3o");
  for (const char* out_str : {"3x0e", "3x0e+3x1o"}) {
    const Irreps out = Irreps::parse(out_str);
    const auto b = symmetric_contraction_basis(in, out, 3);
    const auto sc = SymmetricContraction::from_mace(in, out, 3, b.U, b.shapes);
    const int M = static_cast<int>(sc.monomials.size());
    std::vector<char> read(M, 0), prefix(M, 0);
    for (const auto& en : sc.entries) {
      ASSERT_GE(en.monomial, 0);
      ASSERT_LT(en.monomial, M);
      read[en.monomial] = 1;
    }
    int last_parent = -2;
    std::vector<char> parent_seen(M + 1, 0);
    for (int t = 0; t < M; ++t) {
      const auto& m = sc.monomials[t];
      EXPECT_EQ(m.degree == 1, m.parent < 0) << out_str << " monomial " << t;
      if (m.parent >= 0) {
        EXPECT_LT(m.parent, t) << out_str << ": parent after child at " << t;
        EXPECT_EQ(sc.monomials[m.parent].degree, m.degree - 1);
        EXPECT_LE(sc.monomials[m.parent].last, m.last) << "a sorted tuple";
        prefix[m.parent] = 1;
      }
      if (m.parent != last_parent) {
        EXPECT_FALSE(parent_seen[m.parent + 1])
            << out_str << ": siblings of " << m.parent << " split at " << t;
        parent_seen[m.parent + 1] = 1;
        last_parent = m.parent;
      }
    }
    for (int t = 0; t < M; ++t) {
      EXPECT_TRUE(read[t] || prefix[t])
          << out_str << ": monomial " << t << " is read by no entry and no child";
    }
    std::printf("%s <- 0e+1o+2e+3o, correlation 3: %d of 968 monomials kept, %zu entries\n", out_str, M,
                sc.entries.size());
    EXPECT_LT(M, 968 * 3 / 5);
  }
}

template <class T>
class SymmetricContractionTyped : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SymmetricContractionTyped, Dtypes);

TYPED_TEST(SymmetricContractionTyped, GradientsMatchFiniteDifferences) {
  using T = TypeParam;
  const auto all = cases();
  for (std::size_t which : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
    const auto& k = all[which];
    SymmetricContractionKokkos<Exec, T> kk(k.sc);
    kk.set_weights(k.W, k.num_elements);
    for (int N : test::test_sizes()) {
      const int nodes = std::min(N, 13);  // the dense reference is slow on purpose
      test::Uniform u(N + which);
      std::vector<int> species(nodes);
      std::vector<double> x(static_cast<std::size_t>(nodes) * k.sc.dim_in()), g(static_cast<std::size_t>(nodes) * k.sc.dim_out());
      for (int& s : species) {
        s = static_cast<int>(u(0, k.num_elements));
      }
      for (double& v : x) {
        v = static_cast<double>(static_cast<T>(u(-1, 1)));
      }
      for (double& v : g) {
        v = static_cast<double>(static_cast<T>(u(-1, 1)));
      }
      auto sv = species_view(species);
      auto xv = matrix<T>(x, nodes, k.sc.dim_in());
      auto gv = matrix<T>(g, nodes, k.sc.dim_out());
      auto gx = matrix<T>(std::vector<double>(x.size(), 777.0), nodes, k.sc.dim_in());
      kk.reverse(sv, xv, gv, gx);
      const auto gW = kk.reverse_weights(sv, xv, gv);
      // Finite differences of the double reference.
      auto loss = [&](const std::vector<double>& xx, const Nested& WW) {
        std::vector<double> out(g.size());
        reference::compute_symmetric_contraction(k.sc, k.U, WW, nodes, species.data(), xx.data(), out.data());
        double s = 0;
        for (std::size_t i = 0; i < out.size(); ++i) {
          s += out[i] * g[i];
        }
        return s;
      };
      const double h = 1e-5, tol = std::is_same_v<T, double> ? 1e-6 : 2e-3;
      // Under the sanitizers the kernel's accesses are what is checked, by the one reverse call
      // above; the differences of the dense reference (87 s of the asan run at full count, 21 s
      // so) are sampled more thinly there.
      const std::size_t x_samples = test::kSanitized ? 3 : 12, w_samples = test::kSanitized ? 1 : 3;
      for (std::size_t i = 0; i < x.size(); i += std::max<std::size_t>(1, x.size() / x_samples)) {
        auto xp = x, xm = x;
        xp[i] += h;
        xm[i] -= h;
        const double fd = (loss(xp, k.W) - loss(xm, k.W)) / (2 * h);
        EXPECT_NEAR(gx.data()[i], fd, tol * std::max(1.0, std::abs(fd))) << "x index " << i << " nodes " << nodes;
      }
      if (nodes > 0) {
        for (std::size_t o = 0; o < k.W.size(); ++o) {
          for (std::size_t nu = 0; nu < k.W[o].size(); ++nu) {
            for (std::size_t i = 0; i < k.W[o][nu].size();
                 i += std::max<std::size_t>(1, k.W[o][nu].size() / w_samples)) {
              Nested Wp = k.W, Wm = k.W;
              Wp[o][nu][i] += h;
              Wm[o][nu][i] -= h;
              const double fd = (loss(x, Wp) - loss(x, Wm)) / (2 * h);
              EXPECT_NEAR(gW[o][nu][i], fd, tol * std::max(1.0, std::abs(fd))) << "W[" << o << "][" << nu << "][" << i << "]";
            }
          }
        }
      }
    }
  }
}

// Rotating every node's features by D(R) rotates the products by D(R).
TEST(SymmetricContraction, IsEquivariant) {
  const auto all = cases();
  const auto& k = all[3];  // 0e+1o+2e in and out, correlation 3
  const int N = static_cast<int>(k.species.size());
  SymmetricContractionKokkos<Exec, double> kk(k.sc);
  kk.set_weights(k.W, k.num_elements);
  const auto R = rotation_from_euler(0.4, -1.3, 2.2);
  auto rotate = [&](const Irreps& irreps, const std::vector<double>& m, int rows) {
    const auto D = wigner_D(irreps, R);
    const int d = irreps.dim();
    std::vector<double> r(m.size(), 0.0);
    for (int a = 0; a < rows; ++a) {
      for (int i = 0; i < d; ++i) {
        for (int j = 0; j < d; ++j) {
          r[a * d + i] += D[i * d + j] * m[a * d + j];
        }
      }
    }
    return r;
  };
  auto out = matrix<double>(std::vector<double>(k.out.size()), N, k.sc.dim_out());
  auto out_rot = matrix<double>(std::vector<double>(k.out.size()), N, k.sc.dim_out());
  kk.compute(species_view(k.species), matrix<double>(k.x, N, k.sc.dim_in()), out);
  kk.compute(species_view(k.species), matrix<double>(rotate(k.sc.irreps_in, k.x, N), N, k.sc.dim_in()), out_rot);
  const auto expect = rotate(k.sc.irreps_out, std::vector<double>(out.data(), out.data() + out.size()), N);
  for (std::size_t i = 0; i < expect.size(); ++i) {
    EXPECT_NEAR(out_rot.data()[i], expect[i], 1e-11) << i;
  }
}

TEST(SymmetricContraction, BadInputIsAClearError) {
  const auto all = cases();
  const auto& k = all[1];
  std::vector<std::vector<std::vector<int>>> shapes = {{{16, 1}, {16, 16, 5}}, {{3, 16, 1}, {3, 16, 16, 6}}};
  try {
    SymmetricContraction::from_mace(k.sc.irreps_in, k.sc.irreps_out, 2, k.U, shapes);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("order 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(SymmetricContraction::from_mace(k.sc.irreps_in, k.sc.irreps_out, 5, k.U, shapes), InputError);
  SymmetricContractionKokkos<Exec, double> kk(k.sc);
  auto x = matrix<double>(k.x, static_cast<int>(k.species.size()), k.sc.dim_in());
  Kokkos::View<double**, Kokkos::LayoutRight, Exec> out("out", k.species.size(), k.sc.dim_out());
  EXPECT_THROW(kk.compute(species_view(k.species), x, out), InputError);  // no weights yet
  kk.set_weights(k.W, k.num_elements);
  auto bad = k.species;
  bad[0] = k.num_elements;  // an element the weights do not cover
  EXPECT_THROW(kk.compute(species_view(bad), x, out), InputError);
}

// The flat weights (the trainer's form): folded and unfolded on the execution space. The
// contraction is linear in the weights, so for any V the weight gradient must satisfy
// <grad_W, V> = sum(out(V) * grad_out): checked for each (contraction, order) block alone,
// which pins each block's unfold, against outputs of the fold; and the fold against the
// reference's dense U.
template <class T>
Kokkos::View<T*, Exec> flat_view(const std::vector<double>& v) {
  Kokkos::View<T*, Exec> f("flat", v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    f(i) = static_cast<T>(v[i]);
  }
  return f;
}

TYPED_TEST(SymmetricContractionTyped, FlatWeightsFoldAndUnfoldOnTheExecutionSpace) {
  using T = TypeParam;
  const double tol = test::Tolerance<T>::kernel;
  const auto all = cases();
  for (std::size_t which : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
    const auto& k = all[which];
    const int E = k.num_elements, din = k.sc.dim_in(), dout = k.sc.dim_out();
    const auto flat = k.sc.flatten_weights(k.W, E);
    ASSERT_EQ(flat.size(), k.sc.num_weights(E));
    for (int o = 0; o < static_cast<int>(k.W.size()); ++o) {
      for (int nu = 1; nu <= k.sc.correlation; ++nu) {
        const std::size_t at = k.sc.weight_offset(o, nu, E);
        for (std::size_t i = 0; i < k.W[o][nu - 1].size(); ++i) {
          ASSERT_EQ(flat[at + i], k.W[o][nu - 1][i]) << "contraction " << o << " order " << nu << " @" << i;
        }
      }
    }
    for (int size : test::test_sizes()) {
      const int N = std::min(size, 13);  // the dense reference is slow on purpose
      test::Uniform u(7 * size + which);
      std::vector<int> species(N);
      std::vector<double> x(static_cast<std::size_t>(N) * din), g(static_cast<std::size_t>(N) * dout);
      for (int& s : species) {
        s = static_cast<int>(u(0, E));
      }
      for (double& v : x) {
        v = static_cast<double>(static_cast<T>(u(-1, 1)));
      }
      for (double& v : g) {
        v = static_cast<double>(static_cast<T>(u(-1, 1)));
      }
      const auto sv = species_view(species);
      const auto xv = matrix<T>(x, N, din), gv = matrix<T>(g, N, dout);
      SymmetricContractionKokkos<Exec, T> kk(k.sc);
      kk.set_weights(flat_view<T>(flat), E);
      auto out = matrix<T>(std::vector<double>(g.size(), 777.0), N, dout);
      kk.compute(sv, xv, out);
      std::vector<double> ref(g.size());
      reference::compute_symmetric_contraction(k.sc, k.U, k.W, N, species.data(), x.data(), ref.data());
      double scale = 1e-300;
      for (double v : ref) {
        scale = std::max(scale, std::abs(v));
      }
      for (std::size_t i = 0; i < ref.size(); ++i) {
        ASSERT_NEAR(out.data()[i], ref[i], tol * scale) << "case " << which << " nodes " << N << " @" << i;
      }

      Kokkos::View<T*, Exec> gW("gW", flat.size());
      Kokkos::deep_copy(gW, T(777));
      kk.reverse_weights(sv, xv, gv, gW);
      const auto nested = kk.reverse_weights(sv, xv, gv);
      for (int o = 0; o < static_cast<int>(k.W.size()); ++o) {
        for (int nu = 1; nu <= k.sc.correlation; ++nu) {
          const std::size_t at = k.sc.weight_offset(o, nu, E), n = k.W[o][nu - 1].size();
          // The block alone, as weights V: <grad_W, V> against sum(out(V) * g), in double.
          Nested V = k.W;
          for (auto& per_o : V) {
            for (auto& w : per_o) {
              std::fill(w.begin(), w.end(), 0.0);
            }
          }
          V[o][nu - 1] = k.W[o][nu - 1];
          std::vector<double> outV(g.size());
          reference::compute_symmetric_contraction(k.sc, k.U, V, N, species.data(), x.data(), outV.data());
          double expect = 0, got = 0, size = 1e-300;
          for (std::size_t i = 0; i < g.size(); ++i) {
            expect += outV[i] * g[i];
            size += std::abs(outV[i] * g[i]);
          }
          for (std::size_t i = 0; i < n; ++i) {
            got += static_cast<double>(gW(at + i)) * k.W[o][nu - 1][i];
            ASSERT_EQ(nested[o][nu - 1][i], static_cast<double>(gW(at + i)))
                << "contraction " << o << " order " << nu;
          }
          EXPECT_NEAR(got, expect, 50 * tol * size)
              << "case " << which << " nodes " << N << " contraction " << o << " order " << nu;
        }
      }
    }
  }
}

// The coefficients' storage is reused from call to call; a copy of the kernel keeps its own.
TEST(SymmetricContraction, FlatWeightsAreSetAgainInPlaceAndACopyKeepsItsOwn) {
  const auto all = cases();
  const auto& k = all[2];
  const int E = k.num_elements, N = static_cast<int>(k.species.size());
  const auto W1 = k.sc.flatten_weights(k.W, E);
  auto W2 = W1;
  for (std::size_t i = 0; i < W2.size(); ++i) {
    W2[i] = 0.5 * W2[i] + 0.01 * static_cast<double>(i % 7);
  }
  const auto sv = species_view(k.species);
  const auto xv = matrix<double>(k.x, N, k.sc.dim_in());
  auto run = [&](const SymmetricContractionKokkos<Exec, double>& kk) {
    auto out = matrix<double>(std::vector<double>(k.out.size(), 0.0), N, k.sc.dim_out());
    kk.compute(sv, xv, out);
    return std::vector<double>(out.data(), out.data() + out.size());
  };
  SymmetricContractionKokkos<Exec, double> fresh1(k.sc), fresh2(k.sc);
  fresh1.set_weights(flat_view<double>(W1), E);
  fresh2.set_weights(flat_view<double>(W2), E);
  const auto out1 = run(fresh1), out2 = run(fresh2);
  ASSERT_NE(out1, out2);

  SymmetricContractionKokkos<Exec, double> kk(k.sc);
  kk.set_weights(flat_view<double>(W1), E);
  kk.set_weights(flat_view<double>(W2), E);
  EXPECT_EQ(run(kk), out2);
  kk.set_weights(flat_view<double>(W1), E);
  const auto copy = kk;
  kk.set_weights(flat_view<double>(W2), E);
  EXPECT_EQ(run(copy), out1);
  EXPECT_EQ(run(kk), out2);
}

TEST(SymmetricContraction, FlatWeightsOfTheWrongLengthAreAClearError) {
  const auto all = cases();
  const auto& k = all[1];
  const int E = k.num_elements, N = static_cast<int>(k.species.size());
  const auto flat = k.sc.flatten_weights(k.W, E);
  SymmetricContractionKokkos<Exec, double> kk(k.sc);
  const auto expect = std::to_string(flat.size());
  try {
    kk.set_weights(flat_view<double>(std::vector<double>(flat.begin(), flat.end() - 1)), E);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("set_weights: " + std::to_string(flat.size() - 1) + " weights for " +
                        std::to_string(E) + " elements; expected " + expect),
              std::string::npos)
        << what;
  }
  kk.set_weights(flat_view<double>(flat), E);
  Kokkos::View<double*, Exec> short_gW("gW", flat.size() - 1);
  const auto gv = matrix<double>(std::vector<double>(static_cast<std::size_t>(N) * k.sc.dim_out(), 1.0), N,
                                 k.sc.dim_out());
  try {
    kk.reverse_weights(species_view(k.species), matrix<double>(k.x, N, k.sc.dim_in()), gv, short_gW);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("grad_W holds " + std::to_string(flat.size() - 1) + " values"),
              std::string::npos)
        << e.what();
  }
  Nested bad = k.W;
  bad[0][0].pop_back();
  EXPECT_THROW(k.sc.flatten_weights(bad, E), InputError);
}

}  // namespace
}  // namespace fastmlip::kernels
