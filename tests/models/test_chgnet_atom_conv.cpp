// SPDX-License-Identifier: MIT
// CHGNet's atom convolutions (models/chgnet/chgnet_atom_conv.hpp) on Kokkos' default execution
// space, float and double, odd sizes (7 radial functions, Fa = 5, Fb = 3, 7 nodes of which 5
// local, about 80 edges over several chunks, a centre without edges):
// - x^{k+1} against a naive evaluation in double (reference basis, reference gated MLP, edge
//   by edge), for a layer without and one with the long edges' bias sum, on every path the
//   space has (`rows` and `teams` on the host, `teams` on a GPU), with chunks of 32 rows so that
//   centres straddle chunks;
// - keeping the activations or recomputing them gives the same bits;
// - the reverse (dE/dx^k of every node, dE/db^k, dE/dr) against central finite differences of
//   sum R . x^{k+1} in double, and in float against double; the ghost rows of dE/dx^{k+1} are
//   ignored.
// Built into the model tests (the host) and the device tests (a GPU).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "../common/random_mlp.hpp"
#include "../common/space_views.hpp"
#include "../common/tolerance.hpp"
#include "kernels/reference/dense_ref.hpp"
#include "kernels/reference/radial_basis_ref.hpp"
#include "models/chgnet/chgnet_atom_conv.hpp"

namespace fastmlip::models {
namespace {

using Space = Kokkos::DefaultExecutionSpace;
constexpr bool kHostSpace = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Space::memory_space>::accessible;
constexpr int kRadial = 7, kFa = 5, kFb = 3, kHidden = 7, kLocal = 5, kNodes = 7;

kernels::RadialBasisParams bessel() {
  kernels::RadialBasisParams p;
  for (int n = 1; n <= kRadial; ++n) {
    p.frequencies.push_back(n * M_PI / 6.0);
  }
  p.r_max = 6.0;
  p.envelope_p = 8;
  return p;
}

/// Edges sorted by centre over 5 local nodes (node 2 has none), neighbours among all 7; short
/// (r < 3) edges numbered in edge order.
struct Graph {
  std::vector<int> center, neighbor, center_start{0}, edge_slot;
  std::vector<double> r;
  int S = 0;
  explicit Graph(std::uint64_t seed) {
    test::Uniform u(seed);
    for (int i = 0; i < kLocal; ++i) {
      const int n = i == 2 ? 0 : 11 + 3 * i;
      for (int q = 0; q < n; ++q) {
        center.push_back(i);
        neighbor.push_back(static_cast<int>(u(0, kNodes - 1e-9)));
        r.push_back(u(0.7, 5.8));
        edge_slot.push_back(r.back() < 3.0 ? S++ : -1);
      }
      center_start.push_back(static_cast<int>(center.size()));
    }
  }
  int E() const { return static_cast<int>(center.size()); }
};

/// Two layers' weights: layer 0 without, layer 1 with the long edges' bias sum.
struct Weights {
  std::vector<double> w_bond, w_weights;
  std::vector<kernels::GatedMlpWeights<double>> gmlp;
  std::vector<std::vector<double>> out_w, out_b, long_bias;
  explicit Weights(std::uint64_t seed) {
    test::Uniform u(seed);
    w_bond = test::random_vector(static_cast<std::size_t>(kFb) * kRadial, u);
    w_weights = test::random_vector(static_cast<std::size_t>(kFa) * kRadial, u);
    for (int k = 0; k < 2; ++k) {
      gmlp.push_back(test::random_gated_mlp_weights<double>(2 * kFa + kFb, kHidden, kFa, true, u));
      out_w.push_back(test::random_vector(static_cast<std::size_t>(kFa) * kFa, u));
      out_b.push_back(test::random_vector(kFa, u));
      long_bias.push_back(k == 0 ? std::vector<double>() : test::random_vector(kFb, u));
    }
  }
  template <class T>
  chgnet::AtomConv<Space, T> stage(kernels::DensePath path) const {
    std::vector<kernels::GatedMlp<T>> m;
    std::vector<kernels::Dense<T>> o;
    std::vector<std::vector<T>> lb;
    for (int k = 0; k < 2; ++k) {
      m.emplace_back(test::cast_weights<T>(gmlp[k]), std::vector<int>{kFa, kFb, kFa});
      const auto ow = test::cast<T>(out_w[k]), ob = test::cast<T>(out_b[k]);
      o.emplace_back(kFa, kFa, ow.data(), ob.data());
      lb.push_back(test::cast<T>(long_bias[k]));
    }
    const auto wb = test::cast<T>(w_bond), ww = test::cast<T>(w_weights);
    return chgnet::AtomConv<Space, T>(bessel(), kernels::Dense<T>(kRadial, kFb, wb.data(), nullptr),
                                      kernels::Dense<T>(kRadial, kFa, ww.data(), nullptr), m, o, lb, path);
  }

  /// x^{k+1} [kNodes][Fa], naively (ghost rows zero).
  std::vector<double> reference(int k, const Graph& g, const std::vector<double>& x,
                                const std::vector<double>& b, const std::vector<double>& r) const {
    std::vector<double> basis(r.size() * kRadial), agg(static_cast<std::size_t>(kLocal) * kFa, 0.0);
    kernels::reference::compute_radial_basis(bessel(), r.size(), r.data(), basis.data());
    for (int e = 0; e < g.E(); ++e) {
      std::vector<double> z(2 * kFa + kFb), y(kFa), w(kFa, 0.0);
      for (int j = 0; j < kFa; ++j) {
        z[j] = x[static_cast<std::size_t>(g.center[e]) * kFa + j];
        z[kFa + kFb + j] = x[static_cast<std::size_t>(g.neighbor[e]) * kFa + j];
        for (int n = 0; n < kRadial; ++n) {
          w[j] += w_weights[static_cast<std::size_t>(j) * kRadial + n] *
                  basis[static_cast<std::size_t>(e) * kRadial + n];
        }
      }
      for (int j = 0; j < kFb; ++j) {
        const int s = g.edge_slot[e];
        double v = 0;
        if (s >= 0) {
          v = b[static_cast<std::size_t>(s) * kFb + j];
        } else {
          for (int n = 0; n < kRadial; ++n) {
            v += w_bond[static_cast<std::size_t>(j) * kRadial + n] *
                 basis[static_cast<std::size_t>(e) * kRadial + n];
          }
          v += long_bias[k].empty() ? 0.0 : long_bias[k][j];
        }
        z[kFa + j] = v;
      }
      kernels::reference::compute_gated_mlp(gmlp[k], z.data(), 1, y.data());
      for (int j = 0; j < kFa; ++j) {
        agg[static_cast<std::size_t>(g.center[e]) * kFa + j] += y[j] * w[j];
      }
    }
    std::vector<double> out(static_cast<std::size_t>(kNodes) * kFa, 0.0);
    for (int i = 0; i < kLocal; ++i) {
      for (int o = 0; o < kFa; ++o) {
        double v = out_b[k][o] + x[static_cast<std::size_t>(i) * kFa + o];
        for (int j = 0; j < kFa; ++j) {
          v += out_w[k][static_cast<std::size_t>(o) * kFa + j] * agg[static_cast<std::size_t>(i) * kFa + j];
        }
        out[static_cast<std::size_t>(i) * kFa + o] = v;
      }
    }
    return out;
  }
};

struct Result {
  std::vector<double> x_next, gx, gb, g_r;
};

template <class T>
Result run(chgnet::AtomConv<Space, T>& stage, int k, const Graph& g, const std::vector<double>& x,
           const std::vector<double>& b, const std::vector<double>& gx_next) {
  using M = Kokkos::View<T**, Kokkos::LayoutRight, Space>;
  typename chgnet::AtomConv<Space, T>::Edges e;
  e.n_local = kLocal, e.n_total = kNodes;
  e.center = test::vector_in_space<int>(g.center, "center");
  e.neighbor = test::vector_in_space<int>(g.neighbor, "neighbor");
  e.center_start = test::vector_in_space<int>(g.center_start, "center_start");
  e.edge_slot = test::vector_in_space<int>(g.edge_slot, "edge_slot");
  e.r = test::vector_in_space<T>(g.r, "r");
  const auto xd = test::matrix_in_space<T>(x, kNodes, kFa, "x");
  const auto bd = test::matrix_in_space<T>(b, g.S, kFb, "b");
  const auto gnd = test::matrix_in_space<T>(gx_next, kNodes, kFa, "gx_next");
  M x_next("x_next", kNodes, kFa), gx("gx", kNodes, kFa), gb("gb", g.S, kFb);
  Kokkos::deep_copy(x_next, T(9));  // every value written
  stage.compute(k, e, xd, bd, x_next);
  Kokkos::View<double*, Space> g_r("g_r", g.E());
  stage.reverse(k, e, xd, bd, gnd, gx, gb, g_r);
  return {test::host_values(x_next), test::host_values(gx), test::host_values(gb), test::host_values(g_r)};
}

template <class T>
class ChgnetAtomConv : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ChgnetAtomConv, Dtypes);

TYPED_TEST(ChgnetAtomConv, MatchesANaiveEvaluationAndItsGradient) {
  using T = TypeParam;
  constexpr bool kDouble = std::is_same_v<T, double>;
  const double tol = kDouble ? 1e-11 : 2e-4;
  const std::vector<kernels::DensePath> paths =
      kHostSpace ? std::vector<kernels::DensePath>{kernels::DensePath::rows, kernels::DensePath::teams}
                 : std::vector<kernels::DensePath>{kernels::DensePath::teams};
  const Graph g(5);
  const Weights wt(7);
  test::Uniform u(11);
  const auto x = test::random_vector(static_cast<std::size_t>(kNodes) * kFa, u);
  const auto b = test::random_vector(static_cast<std::size_t>(g.S) * kFb, u);
  auto gx_next = test::random_vector(static_cast<std::size_t>(kNodes) * kFa, u);
  for (int q = kLocal * kFa; q < kNodes * kFa; ++q) {
    gx_next[q] = 1e3;  // ghost rows: not read
  }
  auto loss = [&](int k, const std::vector<double>& xx, const std::vector<double>& bb,
                  const std::vector<double>& rr) {
    const auto out = wt.reference(k, g, xx, bb, rr);
    double l = 0;
    for (int q = 0; q < kLocal * kFa; ++q) {
      l += gx_next[q] * out[q];
    }
    return l;
  };
  ASSERT_GT(g.E(), 2 * 32);
  ASSERT_GT(g.S, 0);
  ASSERT_LT(g.S, g.E());
  for (int k = 0; k < 2; ++k) {
    const auto want = wt.reference(k, g, x, b, g.r);
    // Finite differences of the reference, in double.
    const double h = 1e-6;
    auto fd = [&](auto perturb) { return (perturb(h) - perturb(-h)) / (2 * h); };
    std::vector<double> fd_x(x.size()), fd_b(b.size()), fd_r(g.r.size());
    for (std::size_t q = 0; q < x.size(); ++q) {
      fd_x[q] = fd([&](double d) {
        auto xx = x;
        xx[q] += d;
        return loss(k, xx, b, g.r);
      });
    }
    for (std::size_t q = 0; q < b.size(); ++q) {
      fd_b[q] = fd([&](double d) {
        auto bb = b;
        bb[q] += d;
        return loss(k, x, bb, g.r);
      });
    }
    for (std::size_t q = 0; q < g.r.size(); ++q) {
      fd_r[q] = fd([&](double d) {
        auto rr = g.r;
        rr[q] += d;
        return loss(k, x, b, rr);
      });
    }
    for (const auto path : paths) {
      const std::string at =
          "layer " + std::to_string(k) + (path == kernels::DensePath::rows ? ", rows" : ", teams");
      auto stage = wt.stage<T>(path);
      stage.set_chunk(32);
      const auto got = run<T>(stage, k, g, x, b, gx_next);
      stage.keep(true);
      const auto kept = run<T>(stage, k, g, x, b, gx_next);
      EXPECT_EQ(kept.x_next, got.x_next) << at;
      EXPECT_EQ(kept.gx, got.gx) << at;
      EXPECT_EQ(kept.gb, got.gb) << at;
      EXPECT_EQ(kept.g_r, got.g_r) << at;
      for (std::size_t q = 0; q < want.size(); ++q) {
        EXPECT_NEAR(got.x_next[q], want[q], tol * std::max(1.0, std::abs(want[q]))) << at << " x_next " << q;
      }
      const double gtol = kDouble ? 1e-6 : 3e-3;
      auto near = [&](const std::vector<double>& a, const std::vector<double>& ref, const char* what) {
        ASSERT_EQ(a.size(), ref.size()) << at << " " << what;
        for (std::size_t q = 0; q < a.size(); ++q) {
          EXPECT_NEAR(a[q], ref[q], gtol * std::max(1.0, std::abs(ref[q]))) << at << " " << what << " " << q;
        }
      };
      near(got.gx, fd_x, "dE/dx");
      near(got.gb, fd_b, "dE/db");
      near(got.g_r, fd_r, "dE/dr");
    }
  }
}

TEST(ChgnetAtomConvChecks, BadLayersAndChunksAreRefused) {
  const Weights wt(3);
  auto stage = wt.stage<double>(kernels::DensePath::automatic);
  EXPECT_THROW(stage.set_chunk(33), InputError);
  EXPECT_THROW(stage.set_chunk(0), InputError);
  const Graph g(1);
  typename chgnet::AtomConv<Space, double>::Edges e;
  e.n_local = kLocal, e.n_total = kNodes;
  Kokkos::View<double**, Kokkos::LayoutRight, Space> x("x", kNodes, kFa), b("b", 0, kFb),
      out("out", kNodes, kFa);
  try {
    stage.compute(2, e, x, b, out);
    ADD_FAILURE() << "layer 2 of 2 accepted";
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("layer 2 of 2"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace fastmlip::models
