// SPDX-License-Identifier: MIT
// CHGNet's stored embeddings (models/chgnet/chgnet_embedding.hpp) on Kokkos' default execution
// space, float and double, odd sizes (CHGNet's 31 radial functions cut to 7, odd widths):
// - x^0, b^0 and w' against the reference radial basis and a naive product, on every path the
//   space has (`rows` and `teams` on the host, `teams` on a GPU);
// - the reverse against central finite differences of sum g_b . b^0 + sum g_w . w' in r (double)
//   and, in float, against double.
// Built into the model tests (the host) and the device tests (a GPU).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "../common/random_mlp.hpp"
#include "../common/space_views.hpp"
#include "../common/tolerance.hpp"
#include "kernels/reference/radial_basis_ref.hpp"
#include "models/chgnet/chgnet_embedding.hpp"

namespace fastmlip::models {
namespace {

using Space = Kokkos::DefaultExecutionSpace;
constexpr bool kHostSpace = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space::memory_space>::accessible;
constexpr int kRadial = 7, kFa = 11, kFb = 9, kElements = 4;

kernels::RadialBasisParams bessel(double rc) {
  kernels::RadialBasisParams p;
  for (int n = 1; n <= kRadial; ++n) {
    p.frequencies.push_back(n * M_PI / rc);
  }
  p.r_max = rc;
  p.envelope_p = 8;
  return p;
}

struct Weights {
  std::vector<double> table, w_bond, w_weights;
  explicit Weights(std::uint64_t seed) {
    test::Uniform u(seed);
    table = test::random_vector(static_cast<std::size_t>(kElements) * kFa, u);
    w_bond = test::random_vector(static_cast<std::size_t>(kFb) * kRadial, u);
    w_weights = test::random_vector(static_cast<std::size_t>(kFb) * kRadial, u);
  }
  template <class T>
  chgnet::Embedding<Space, T> stage(kernels::DensePath path) const {
    const auto wb = test::cast<T>(w_bond), ww = test::cast<T>(w_weights);
    return chgnet::Embedding<Space, T>(test::cast<T>(table), kFa, bessel(6.0), bessel(3.0),
                                       kernels::Dense<T>(kRadial, kFb, wb.data(), nullptr),
                                       kernels::Dense<T>(kRadial, kFb, ww.data(), nullptr), path);
  }
  /// [S][Fb] = W B(r) with the reference basis of cutoff rc.
  std::vector<double> rows(const std::vector<double>& w, double rc, const std::vector<double>& r) const {
    std::vector<double> basis(r.size() * kRadial), out(r.size() * kFb, 0.0);
    kernels::reference::compute_radial_basis(bessel(rc), r.size(), r.data(), basis.data());
    for (std::size_t s = 0; s < r.size(); ++s) {
      for (int o = 0; o < kFb; ++o) {
        for (int n = 0; n < kRadial; ++n) {
          out[s * kFb + o] += w[static_cast<std::size_t>(o) * kRadial + n] * basis[s * kRadial + n];
        }
      }
    }
    return out;
  }
};

struct Result {
  std::vector<double> x0, b0, w, grad_r;
};

template <class T>
Result run(const Weights& wt, const std::vector<int>& species, const std::vector<double>& r,
           const std::vector<double>& g_b, const std::vector<double>& g_w, kernels::DensePath path) {
  using M = Kokkos::View<T**, Kokkos::LayoutRight, Space>;
  const auto stage = wt.stage<T>(path);
  const int N = static_cast<int>(species.size()), S = static_cast<int>(r.size());
  const auto sp = test::vector_in_space<int>(species, "species");
  const auto rs = test::vector_in_space<T>(r, "r");
  const auto gb = test::matrix_in_space<T>(g_b, S, kFb, "g_b"),
             gw = test::matrix_in_space<T>(g_w, S, kFb, "g_w");
  M x0("x0", N, kFa), b0("b0", S, kFb), w("w", S, kFb);
  stage.compute(sp, rs, x0, b0, w);
  Kokkos::View<double*, Space> grad("grad_r", S);
  Kokkos::deep_copy(grad, 777.0);  // overwritten
  stage.reverse(rs, gb, gw, grad);
  return {test::host_values(x0), test::host_values(b0), test::host_values(w), test::host_values(grad)};
}

template <class T>
class ChgnetEmbedding : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ChgnetEmbedding, Dtypes);

TYPED_TEST(ChgnetEmbedding, MatchesTheReferenceAndItsGradient) {
  using T = TypeParam;
  constexpr bool kDouble = std::is_same_v<T, double>;
  const double tol = kDouble ? 1e-12 : 3e-5;
  const std::vector<kernels::DensePath> paths =
      kHostSpace ? std::vector<kernels::DensePath>{kernels::DensePath::rows, kernels::DensePath::teams}
                 : std::vector<kernels::DensePath>{kernels::DensePath::teams};
  for (const int S : {0, 1, 13, 37}) {
    const Weights wt(static_cast<std::uint64_t>(S) + 1);
    test::Uniform u(static_cast<std::uint64_t>(S) + 50);
    std::vector<int> species;
    for (int i = 0; i < 5 + S % 3; ++i) {
      species.push_back(static_cast<int>(u(0, kElements - 1e-9)));
    }
    const auto r = test::random_vector(static_cast<std::size_t>(S), u, 0.6, 2.95);  // short: < 3 A
    const auto g_b = test::random_vector(static_cast<std::size_t>(S) * kFb, u);
    const auto g_w = test::random_vector(static_cast<std::size_t>(S) * kFb, u);
    const auto b0 = wt.rows(wt.w_bond, 6.0, r), w = wt.rows(wt.w_weights, 3.0, r);
    const auto ref = run<double>(wt, species, r, g_b, g_w, paths.front());
    for (const auto path : paths) {
      const auto got = run<T>(wt, species, r, g_b, g_w, path);
      const std::string at =
          std::to_string(S) + " short edges, " + (path == kernels::DensePath::rows ? "rows" : "teams");
      for (std::size_t i = 0; i < species.size(); ++i) {
        for (int j = 0; j < kFa; ++j) {
          EXPECT_EQ(got.x0[i * kFa + j], static_cast<double>(static_cast<T>(wt.table[species[i] * kFa + j])))
              << at;
        }
      }
      for (std::size_t q = 0; q < b0.size(); ++q) {
        EXPECT_NEAR(got.b0[q], b0[q], tol * 10) << at << " b0 " << q;
        EXPECT_NEAR(got.w[q], w[q], tol * 10) << at << " w " << q;
      }
      for (int s = 0; s < S; ++s) {
        EXPECT_NEAR(got.grad_r[s], ref.grad_r[s], tol * 100 * std::max(1.0, std::abs(ref.grad_r[s])))
            << at << " " << s;
      }
    }
    if constexpr (kDouble) {
      const auto loss = [&](const std::vector<double>& rr) {
        const auto b = wt.rows(wt.w_bond, 6.0, rr), ww = wt.rows(wt.w_weights, 3.0, rr);
        double l = 0;
        for (std::size_t q = 0; q < b.size(); ++q) {
          l += g_b[q] * b[q] + g_w[q] * ww[q];
        }
        return l;
      };
      const double h = 1e-6;
      for (int s = 0; s < S; ++s) {
        auto rp = r, rm = r;
        rp[s] += h;
        rm[s] -= h;
        const double fd = (loss(rp) - loss(rm)) / (2 * h);
        EXPECT_NEAR(ref.grad_r[s], fd, 1e-6 * std::max(1.0, std::abs(fd))) << S << " short edges, " << s;
      }
    }
  }
}

}  // namespace
}  // namespace fastmlip::models
