// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../common/random_mlp.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "kernels/linear_kokkos.hpp"
#include "kernels/radial_mlp_kokkos.hpp"
#include "kernels/reference/linear_ref.hpp"
#include "kernels/reference/radial_mlp_ref.hpp"
#include "math/dual.hpp"

namespace fastmlip::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;

nlohmann::json load(const char* name) {
  std::ifstream in(std::string(FASTMLIP_REFERENCE_DATA_DIR "/kernels/") + name);
  EXPECT_TRUE(in.good()) << "missing fixture " << name << "; regenerate with tests/reference/make_kernel_fixtures.py";
  return nlohmann::json::parse(in);
}

template <class T>
Kokkos::View<T**, Kokkos::LayoutRight, Exec> matrix(const std::vector<double>& v, std::size_t rows, std::size_t cols) {
  Kokkos::View<T**, Kokkos::LayoutRight, Exec> m("m", rows, cols);
  EXPECT_EQ(v.size(), rows * cols);
  for (std::size_t i = 0; i < v.size(); ++i) {
    m.data()[i] = static_cast<T>(v[i]);
  }
  return m;
}

double max_abs(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) {
    s = std::max(s, std::abs(x));
  }
  return s;
}

TEST(EquivariantLinear, MatchesE3nnLinearAndSkipTP) {
  const auto data = load("linear.json");
  ASSERT_EQ(data["linear"].size(), 3u);
  ASSERT_EQ(data["skip_tp"].size(), 2u);
  auto run = [](const EquivariantLinear& lin, const std::vector<double>& w, const std::vector<int>& species,
                const std::vector<double>& x, const std::vector<double>& expect) {
    const std::size_t N = x.size() / lin.irreps_in.dim();
    const auto W = lin.weights_from_e3nn(w);
    std::vector<double> ref(expect.size());
    reference::compute_linear(lin, N, species.empty() ? nullptr : species.data(), W.data(), x.data(), ref.data());
    LinearKokkos<Exec, double> k(lin);
    Kokkos::View<int*, Exec> set("set", species.size());
    std::copy(species.begin(), species.end(), set.data());
    auto out = matrix<double>(std::vector<double>(expect.size(), 777.0), N, lin.irreps_out.dim());
    k.compute(matrix<double>(W, lin.num_sets, lin.weight_numel), set, matrix<double>(x, N, lin.irreps_in.dim()), out);
    const double scale = max_abs(expect);
    for (std::size_t i = 0; i < expect.size(); ++i) {
      EXPECT_NEAR(ref[i], expect[i], 1e-12 * scale) << lin.irreps_in.str() << " @" << i;
      EXPECT_NEAR(out.data()[i], expect[i], 1e-12 * scale) << lin.irreps_in.str() << " @" << i;
    }
  };
  for (const auto& c : data["linear"]) {
    run(EquivariantLinear::e3nn(Irreps::parse(c["irreps_in"].get<std::string>()),
                                Irreps::parse(c["irreps_out"].get<std::string>())),
        c["weight"].get<std::vector<double>>(), {}, c["x"].get<std::vector<double>>(), c["out"].get<std::vector<double>>());
  }
  for (const auto& c : data["skip_tp"]) {
    run(EquivariantLinear::element_skip(Irreps::parse(c["irreps_in"].get<std::string>()), c["num_elements"].get<int>(),
                                        Irreps::parse(c["irreps_out"].get<std::string>())),
        c["weight"].get<std::vector<double>>(), c["species"].get<std::vector<int>>(), c["x"].get<std::vector<double>>(),
        c["out"].get<std::vector<double>>());
  }
}

template <class T>
class LinearTyped : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LinearTyped, Dtypes);

TYPED_TEST(LinearTyped, ReverseMatchesFiniteDifferences) {
  using T = TypeParam;
  const auto lin = EquivariantLinear::element_skip(Irreps::parse("3x0e+2x1o+3x0e+2x2e"), 3, Irreps::parse("4x0e+2x1o+1x2e"));
  LinearKokkos<Exec, T> k(lin);
  for (int N : test::test_sizes()) {
    test::Uniform u(N);
    std::vector<double> W(lin.num_sets * lin.weight_numel), x(N * lin.irreps_in.dim()), g(N * lin.irreps_out.dim());
    std::vector<int> species(N);
    for (auto* v : {&W, &x, &g}) {
      for (double& a : *v) {
        a = static_cast<double>(static_cast<T>(u(-1, 1)));
      }
    }
    for (int& s : species) {
      s = static_cast<int>(u(0, 3));
    }
    Kokkos::View<int*, Exec> set("set", N);
    std::copy(species.begin(), species.end(), set.data());
    auto Wv = matrix<T>(W, lin.num_sets, lin.weight_numel);
    auto xv = matrix<T>(x, N, lin.irreps_in.dim());
    auto gv = matrix<T>(g, N, lin.irreps_out.dim());
    auto gx = matrix<T>(std::vector<double>(x.size(), 777.0), N, lin.irreps_in.dim());
    auto gW = matrix<T>(std::vector<double>(W.size(), 777.0), lin.num_sets, lin.weight_numel);
    k.reverse(Wv, set, xv, gv, gx);
    k.reverse_weights(Wv, set, xv, gv, gW);
    // The map is linear in x and in W: the loss is exactly sum(out * g), so these hold to round-off.
    auto loss = [&](const std::vector<double>& WW, const std::vector<double>& xx) {
      std::vector<double> out(g.size());
      reference::compute_linear(lin, N, species.data(), WW.data(), xx.data(), out.data());
      double s = 0;
      for (std::size_t i = 0; i < out.size(); ++i) {
        s += out[i] * g[i];
      }
      return s;
    };
    const double h = 1e-3, tol = std::is_same_v<T, double> ? 1e-9 : 1e-4;
    for (std::size_t i = 0; i < x.size(); i += std::max<std::size_t>(1, x.size() / 30)) {
      auto p = x, m = x;
      p[i] += h;
      m[i] -= h;
      const double fd = (loss(W, p) - loss(W, m)) / (2 * h);
      EXPECT_NEAR(gx.data()[i], fd, tol * std::max(1.0, std::abs(fd))) << "x " << i;
    }
    for (std::size_t i = 0; i < W.size(); i += std::max<std::size_t>(1, W.size() / 30)) {
      auto p = W, m = W;
      p[i] += h;
      m[i] -= h;
      const double fd = (loss(p, x) - loss(m, x)) / (2 * h);
      EXPECT_NEAR(gW.data()[i], fd, tol * std::max(1.0, std::abs(fd))) << "W " << i << " N " << N;
    }
  }
}

RadialMLP mlp_from(const nlohmann::json& c) {
  RadialMLP mlp;
  mlp.widths = c["hs"].get<std::vector<int>>();
  mlp.weights = c["weights"].get<std::vector<std::vector<double>>>();
  mlp.act_cst = c["cst"].get<double>();
  return mlp;
}

TEST(RadialMLP, MatchesE3nnFullyConnectedNet) {
  const auto data = load("radial_mlp.json");
  ASSERT_EQ(data["radial_mlp"].size(), 2u);
  for (const auto& c : data["radial_mlp"]) {
    const RadialMLP mlp = mlp_from(c);
    const auto x = c["x"].get<std::vector<double>>(), expect = c["out"].get<std::vector<double>>();
    const std::size_t E = x.size() / mlp.width_in();
    std::vector<double> ref(expect.size());
    reference::compute_radial_mlp(mlp, E, x.data(), ref.data());
    RadialMLPKokkos<Exec, double> k(mlp);
    auto out = matrix<double>(std::vector<double>(expect.size(), 777.0), E, mlp.width_out());
    k.compute(matrix<double>(x, E, mlp.width_in()), out);
    const double scale = max_abs(expect);
    for (std::size_t i = 0; i < expect.size(); ++i) {
      EXPECT_NEAR(ref[i], expect[i], 1e-12 * scale) << i;
      EXPECT_NEAR(out.data()[i], expect[i], 1e-12 * scale) << i;
    }
  }
}

// sum(MLP(x) * g) by the reference: the loss whose gradients the tests difference.
double mlp_loss(const RadialMLP& m, int edges, const std::vector<double>& x, const std::vector<double>& g) {
  std::vector<double> out(g.size());
  reference::compute_radial_mlp(m, edges, x.data(), out.data());
  double s = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    s += out[i] * g[i];
  }
  return s;
}

// Random inputs and output gradients of `edges` rows, representable in T.
template <class T>
std::pair<std::vector<double>, std::vector<double>> random_rows(const RadialMLP& mlp, int edges, std::uint64_t seed) {
  test::Uniform u(seed);
  std::vector<double> x(edges * mlp.width_in()), g(edges * mlp.width_out());
  for (auto* v : {&x, &g}) {
    for (double& a : *v) {
      a = static_cast<double>(static_cast<T>(u(-1, 1)));
    }
  }
  return {x, g};
}

// An MLP 8 -> 17 -> 11 -> 151 with random weights: two hidden layers and an output wider than
// the tiled kernel's column chunk.
RadialMLP wide_mlp(std::uint64_t seed) { return test::random_radial_mlp({8, 17, 11, 151}, 1.679177, seed); }

template <class T>
class RadialMLPTyped : public ::testing::Test {};
TYPED_TEST_SUITE(RadialMLPTyped, Dtypes);

TYPED_TEST(RadialMLPTyped, ReverseMatchesFiniteDifferences) {
  using T = TypeParam;
  const auto data = load("radial_mlp.json");
  const RadialMLP mlp = mlp_from(data["radial_mlp"][0]);
  RadialMLPKokkos<Exec, T> k(mlp);
  for (int E : test::test_sizes()) {
    const int edges = std::min(E, 40);
    const auto rows = random_rows<T>(mlp, edges, E + 1);
    const std::vector<double>& x = rows.first, &g = rows.second;
    auto gx = matrix<T>(std::vector<double>(x.size(), 777.0), edges, mlp.width_in());
    k.reverse(matrix<T>(x, edges, mlp.width_in()), matrix<T>(g, edges, mlp.width_out()), gx);
    const auto gW = k.reverse_weights(matrix<T>(x, edges, mlp.width_in()), matrix<T>(g, edges, mlp.width_out()));
    auto loss = [&](const RadialMLP& m, const std::vector<double>& xx) { return mlp_loss(m, edges, xx, g); };
    const double h = 1e-5, tol = std::is_same_v<T, double> ? 1e-7 : 1e-3;
    for (std::size_t i = 0; i < x.size(); i += std::max<std::size_t>(1, x.size() / 20)) {
      auto p = x, m = x;
      p[i] += h;
      m[i] -= h;
      const double fd = (loss(mlp, p) - loss(mlp, m)) / (2 * h);
      EXPECT_NEAR(gx.data()[i], fd, tol * std::max(1.0, std::abs(fd))) << "input " << i;
    }
    for (int l = 0; l < mlp.num_layers(); ++l) {
      for (std::size_t i = 0; i < mlp.weights[l].size(); i += std::max<std::size_t>(1, mlp.weights[l].size() / 8)) {
        RadialMLP p = mlp, m = mlp;
        p.weights[l][i] += h;
        m.weights[l][i] -= h;
        const double fd = (loss(p, x) - loss(m, x)) / (2 * h);
        EXPECT_NEAR(gW[l][i], fd, tol * std::max(1.0, std::abs(fd))) << "layer " << l << " weight " << i;
      }
    }
  }
}

// The input gradient is computed in tiles of edges with grad_out staged in column chunks: an
// output wider than several chunks (MACE's weight_numel is 512-1536) and edge counts that
// leave partial tiles.
TYPED_TEST(RadialMLPTyped, ReverseOfAWideOutputMatchesFiniteDifferences) {
  using T = TypeParam;
  const RadialMLP mlp = wide_mlp(77);
  RadialMLPKokkos<Exec, T> k(mlp);
  for (int edges : {1, 13, 45}) {
    const auto rows = random_rows<T>(mlp, edges, edges);
    const std::vector<double>& x = rows.first, &g = rows.second;
    auto gx = matrix<T>(std::vector<double>(x.size(), 777.0), edges, mlp.width_in());
    k.reverse(matrix<T>(x, edges, mlp.width_in()), matrix<T>(g, edges, mlp.width_out()), gx);
    auto loss = [&](const std::vector<double>& xx) { return mlp_loss(mlp, edges, xx, g); };
    const double h = 1e-5, tol = std::is_same_v<T, double> ? 1e-7 : 1e-3;
    for (std::size_t i = 0; i < x.size(); i += 3) {
      auto p = x, m = x;
      p[i] += h;
      m[i] -= h;
      const double fd = (loss(p) - loss(m)) / (2 * h);
      EXPECT_NEAR(gx.data()[i], fd, tol * std::max(1.0, std::abs(fd))) << edges << " edges, input " << i;
    }
  }
}

// Host spaces run the MLP in chunks of edges (impl/radial_mlp_gemm.hpp): edge counts across
// several chunks, with a partial last one, against the reference; reverse_all's forward, input
// gradient and weight gradients against compute, reverse and finite differences.
TYPED_TEST(RadialMLPTyped, ManyEdgesMatchTheReferenceAcrossChunks) {
  using T = TypeParam;
  const RadialMLP mlp = wide_mlp(91);
  const RadialMLPKokkos<Exec, T> k(mlp);
  const int edges = 601;
  const auto rows = random_rows<T>(mlp, edges, 5);
  const std::vector<double>&x = rows.first, &g = rows.second;
  std::vector<double> ref(g.size());
  reference::compute_radial_mlp(mlp, edges, x.data(), ref.data());
  const auto X = matrix<T>(x, edges, mlp.width_in()), G = matrix<T>(g, edges, mlp.width_out());
  auto out = matrix<T>(std::vector<double>(g.size(), 777.0), edges, mlp.width_out());
  auto out_all = matrix<T>(std::vector<double>(g.size(), 777.0), edges, mlp.width_out());
  auto gx = matrix<T>(std::vector<double>(x.size(), 777.0), edges, mlp.width_in());
  auto gx_all = matrix<T>(std::vector<double>(x.size(), 777.0), edges, mlp.width_in());
  k.compute(X, out);
  k.reverse(X, G, gx);
  const auto gW = k.reverse_all(X, G, gx_all, out_all);
  const double tol = test::Tolerance<T>::kernel, scale = max_abs(ref);
  for (std::size_t i = 0; i < ref.size(); ++i) {
    EXPECT_NEAR(out.data()[i], ref[i], tol * scale) << "output " << i;
    EXPECT_EQ(out_all.data()[i], out.data()[i]) << "output " << i;
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(gx_all.data()[i], gx.data()[i]) << "input " << i;
  }
  auto loss = [&](const RadialMLP& m, const std::vector<double>& xx) { return mlp_loss(m, edges, xx, g); };
  const double h = 1e-5, fd_tol = std::is_same_v<T, double> ? 1e-7 : 1e-3;
  for (std::size_t i = 0; i < x.size(); i += 97) {
    auto p = x, m = x;
    p[i] += h;
    m[i] -= h;
    const double fd = (loss(mlp, p) - loss(mlp, m)) / (2 * h);
    EXPECT_NEAR(gx.data()[i], fd, fd_tol * std::max(1.0, std::abs(fd))) << "input " << i;
  }
  for (int l = 0; l < mlp.num_layers(); ++l) {
    for (std::size_t i = 0; i < mlp.weights[l].size();
         i += std::max<std::size_t>(1, mlp.weights[l].size() / 7)) {
      RadialMLP p = mlp, m = mlp;
      p.weights[l][i] += h;
      m.weights[l][i] -= h;
      const double fd = (loss(p, x) - loss(m, x)) / (2 * h);
      EXPECT_NEAR(gW[l][i], fd, fd_tol * std::max(1.0, std::abs(fd))) << "layer " << l << " weight " << i;
    }
  }
}

// The trainer's form: weights set from one flat array on the execution space (every layer in
// turn, unscaled) and the weight gradient written to one. Setting B's weights on a kernel built
// with A's must give exactly what a kernel built with B's gives: outputs, input gradients and
// weight gradients, and for dual numbers the tangents; a copy keeps the weights it had.
template <class S>
Kokkos::View<S*, Exec> flat_of(const RadialMLP& m, const RadialMLP* tangent = nullptr) {
  std::size_t n = 0;
  for (const auto& w : m.weights) {
    n += w.size();
  }
  Kokkos::View<S*, Exec> v("flat", n);
  std::size_t k = 0;
  for (std::size_t l = 0; l < m.weights.size(); ++l) {
    for (std::size_t i = 0; i < m.weights[l].size(); ++i, ++k) {
      if constexpr (is_dual_v<S>) {
        using V = typename S::value_type;
        v(k) = S(static_cast<V>(m.weights[l][i]), static_cast<V>(tangent->weights[l][i]));
      } else {
        v(k) = static_cast<S>(m.weights[l][i]);
      }
    }
  }
  return v;
}

// Weights representable in T: the trainer's weights are tensors of T.
template <class T>
RadialMLP rounded(RadialMLP m) {
  for (auto& w : m.weights) {
    for (double& v : w) {
      v = static_cast<double>(static_cast<T>(v));
    }
  }
  return m;
}

TYPED_TEST(RadialMLPTyped, FlatWeightsAreSetAndDifferentiatedOnTheExecutionSpace) {
  using T = TypeParam;
  using K = RadialMLPKokkos<Exec, T>;
  const RadialMLP A = rounded<T>(wide_mlp(91)), B = rounded<T>(wide_mlp(92));
  for (int edges : {0, 1, 13, 601}) {
    const auto rows = random_rows<T>(A, edges, 3 + edges);
    const auto X = matrix<T>(rows.first, edges, A.width_in()),
               G = matrix<T>(rows.second, edges, A.width_out());
    auto run = [&](const K& k, typename K::Vector gw) {
      auto out = matrix<T>(std::vector<double>(rows.second.size(), 777.0), edges, A.width_out());
      auto gx = matrix<T>(std::vector<double>(rows.first.size(), 777.0), edges, A.width_in());
      k.reverse_all(X, G, gx, out, gw);
      std::vector<T> all(out.data(), out.data() + out.size());
      all.insert(all.end(), gx.data(), gx.data() + gx.size());
      all.insert(all.end(), gw.data(), gw.data() + gw.size());
      return all;
    };
    const K kb(B);
    K k(A);
    EXPECT_EQ(k.num_weights(), flat_of<T>(B).extent(0));
    typename K::Vector gw("gw", k.num_weights()), gwb("gwb", k.num_weights());
    k.set_weights(flat_of<T>(B));
    const auto expect = run(kb, gwb);
    EXPECT_EQ(run(k, gw), expect) << edges << " edges";
    // The flat gradient is the per-layer one, in the same bits.
    const auto nested = kb.reverse_weights(X, G);
    std::size_t at = 0;
    for (const auto& layer : nested) {
      for (double v : layer) {
        ASSERT_EQ(gw(at++), static_cast<T>(v)) << edges << " edges, weight " << at - 1;
      }
    }
    k.reverse_weights(X, G, gw);
    EXPECT_EQ(std::vector<T>(gw.data(), gw.data() + gw.size()),
              std::vector<T>(gwb.data(), gwb.data() + gwb.size()));
    // A copy keeps B's weights when the original is set back to A's.
    const K copy = k;
    k.set_weights(flat_of<T>(A));
    EXPECT_EQ(run(copy, gw), expect) << edges << " edges";
    EXPECT_EQ(run(k, gw), run(K(A), gwb)) << edges << " edges";
  }
  // Dual numbers: B's weights with tangents A's, against a kernel built with them.
  const auto rows = random_rows<T>(A, 13, 8);
  using D = Dual<T>;
  using KD = RadialMLPKokkos<Exec, D>;
  Kokkos::View<D**, Kokkos::LayoutRight, Exec> X("X", 13, A.width_in()), out1("o1", 13, A.width_out()),
      out2("o2", 13, A.width_out());
  for (std::size_t i = 0; i < rows.first.size(); ++i) {
    X.data()[i] = D(static_cast<T>(rows.first[i]), static_cast<T>(0.5 * rows.first[i]));
  }
  KD kd(A);
  kd.set_weights(flat_of<D>(B, &A));
  KD(B, A.weights).compute(X, out1);
  kd.compute(X, out2);
  for (std::size_t i = 0; i < out1.size(); ++i) {
    ASSERT_EQ(out1.data()[i].v, out2.data()[i].v) << i;
    ASSERT_EQ(out1.data()[i].d, out2.data()[i].d) << i;
  }
  try {
    K(A).set_weights(Kokkos::View<T*, Exec>("short", flat_of<T>(A).extent(0) - 1));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("the layers 8-17-11-151 have " + std::to_string(flat_of<T>(A).extent(0))),
        std::string::npos)
        << e.what();
  }
}

// The forward and reverse stages cut the nodes of each weight set into tiles, on the execution
// space: sets of every size (none, fewer than a tile, many tiles and a remainder), in scrambled
// node order, each node's row as the reference computes it.
TYPED_TEST(LinearTyped, ManyNodesOfSeveralSetsMatchTheReference) {
  using T = TypeParam;
  const auto lin = EquivariantLinear::element_skip(Irreps::parse("3x0e+2x1o"), 5, Irreps::parse("4x0e+1x1o"));
  LinearKokkos<Exec, T> k(lin);
  for (int N : {0, 1, 15, 16, 17, 333}) {
    test::Uniform u(N + 7);
    std::vector<double> W(lin.num_sets * lin.weight_numel), x(N * lin.irreps_in.dim()), g(N * lin.irreps_out.dim());
    for (auto* v : {&W, &x, &g}) {
      for (double& a : *v) {
        a = static_cast<double>(static_cast<T>(u(-1, 1)));
      }
    }
    std::vector<int> species(N);
    for (int n = 0; n < N; ++n) {
      // Set 3 stays empty; set 4 has a single node; sets 0-2 the rest, scrambled.
      species[n] = n == N / 2 ? 4 : static_cast<int>(u(0, 3));
    }
    Kokkos::View<int*, Exec> set("set", N);
    std::copy(species.begin(), species.end(), set.data());
    const auto Wv = matrix<T>(W, lin.num_sets, lin.weight_numel);
    auto out = matrix<T>(std::vector<double>(g.size(), 777.0), N, lin.irreps_out.dim());
    auto gx = matrix<T>(std::vector<double>(x.size(), 777.0), N, lin.irreps_in.dim());
    k.compute(Wv, set, matrix<T>(x, N, lin.irreps_in.dim()), out);
    k.reverse(Wv, set, matrix<T>(x, N, lin.irreps_in.dim()), matrix<T>(g, N, lin.irreps_out.dim()), gx);
    std::vector<double> ref(g.size());
    reference::compute_linear(lin, N, species.data(), W.data(), x.data(), ref.data());
    const double tol = std::is_same_v<T, double> ? 1e-13 : 2e-6;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      ASSERT_NEAR(out.data()[i], ref[i], tol * (1 + std::abs(ref[i]))) << "N " << N << " @" << i;
    }
    // The reverse stage is the transpose: sum(gx * x) = sum(g * out).
    double lhs = 0, rhs = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      lhs += static_cast<double>(gx.data()[i]) * x[i];
    }
    for (std::size_t i = 0; i < g.size(); ++i) {
      rhs += g[i] * ref[i];
    }
    EXPECT_NEAR(lhs, rhs, 100 * tol * (1 + std::abs(rhs))) << "N " << N;
    for (std::size_t i = 0; i < gx.size(); ++i) {
      ASSERT_NE(gx.data()[i], T(777)) << "N " << N << ": a row the reverse stage left unwritten";
    }
  }
}

TEST(LinearAndMLP, BadInputIsAClearError) {
  const auto lin = EquivariantLinear::element_skip(Irreps::parse("2x0e"), 2, Irreps::parse("2x0e"));
  EXPECT_THROW(lin.weights_from_e3nn(std::vector<double>(3)), InputError);
  LinearKokkos<Exec, double> k(lin);
  Kokkos::View<int*, Exec> set("set", 2);
  set(1) = 5;  // element outside the weights
  auto W = matrix<double>(std::vector<double>(lin.num_sets * lin.weight_numel), lin.num_sets, lin.weight_numel);
  Kokkos::View<double**, Kokkos::LayoutRight, Exec> x("x", 2, 2), out("o", 2, 2);
  try {
    k.compute(W, set, x, out);
    ADD_FAILURE() << "a label outside the weights was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("LinearKokkos::compute: node 1 has element index 5; the weights cover 0..1"),
              std::string::npos)
        << e.what();
  }
  set(0) = -1;
  EXPECT_THROW(k.reverse(W, set, x, out, x), InputError);
  RadialMLP mlp;
  mlp.widths = {3, 4};
  mlp.weights = {std::vector<double>(11)};
  EXPECT_THROW(mlp.validate(), InputError);
}

}  // namespace
}  // namespace fastmlip::kernels
