// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/random_graph.hpp"
#include "../common/random_mlp.hpp"
#include "../common/tolerance.hpp"
#include "../common/tp_chunks.hpp"
#include "core/error.hpp"
#include "kernels/channelwise_tp_kokkos.hpp"
#include "kernels/reference/channelwise_tp_ref.hpp"
#include "math/wigner_d.hpp"

namespace fastmlip::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using Matrix = Kokkos::View<double**, Kokkos::LayoutRight, Exec>;

nlohmann::json fixtures() {
  std::ifstream in(FASTMLIP_REFERENCE_DATA_DIR "/kernels/channelwise_tp.json");
  EXPECT_TRUE(in.good()) << "missing fixture; regenerate with tests/reference/make_kernel_fixtures.py";
  return nlohmann::json::parse(in);
}

// MACE's interaction target: (sh * channels).sort().simplify().
Irreps mace_target(int lmax, int channels) {
  std::vector<MulIrrep> e;
  for (const auto& s : Irreps::spherical_harmonics(lmax)) {
    e.push_back({channels, s.ir});
  }
  return Irreps(e);
}

TEST(ChannelwiseTP, DescriptorAndOutputMatchE3nn) {
  const auto data = fixtures();
  ASSERT_GE(data["channelwise_tp"].size(), 5u);
  for (const auto& c : data["channelwise_tp"]) {
    const auto tp = ChannelwiseTP::mace(Irreps::parse(c["irreps1"].get<std::string>()),
                                        Irreps::parse(c["irreps2"].get<std::string>()),
                                        Irreps::parse(c["target"].get<std::string>()));
    EXPECT_EQ(tp.irreps_out.str(), c["irreps_out"].get<std::string>());
    EXPECT_EQ(tp.weight_numel, c["weight_numel"].get<int>());
    ASSERT_EQ(tp.instructions.size(), c["instructions"].size());
    for (std::size_t q = 0; q < tp.instructions.size(); ++q) {
      EXPECT_EQ(tp.instructions[q].i1, c["instructions"][q][0].get<int>());
      EXPECT_EQ(tp.instructions[q].i2, c["instructions"][q][1].get<int>());
      EXPECT_EQ(tp.instructions[q].out, c["instructions"][q][2].get<int>());
    }
    const auto sender = c["sender"].get<std::vector<int>>(), receiver = c["receiver"].get<std::vector<int>>();
    const auto x = c["x"].get<std::vector<double>>(), Y = c["Y"].get<std::vector<double>>(),
               w = c["w"].get<std::vector<double>>(), expect = c["out"].get<std::vector<double>>();
    const int N = c["num_nodes"].get<int>(), E = static_cast<int>(sender.size());
    std::vector<double> ref(expect.size());
    reference::compute_channelwise_tp(tp, N, E, sender.data(), receiver.data(), x.data(), Y.data(), w.data(), ref.data());
    // Kokkos, on the same inputs.
    const ChannelwiseTPKokkos<Exec, double> k(tp);
    const auto g = EdgeIndex<Exec>::build(N, sender, receiver);
    Matrix xv("x", N, tp.dim1()), Yv("Y", E, tp.dim2()), wv("w", E, tp.weight_numel), out("out", N, tp.dim_out());
    std::copy(x.begin(), x.end(), xv.data());
    std::copy(Y.begin(), Y.end(), Yv.data());
    std::copy(w.begin(), w.end(), wv.data());
    k.compute(g, xv, Yv, wv, out);
    double scale = 0;
    for (double v : expect) {
      scale = std::max(scale, std::abs(v));
    }
    for (std::size_t i = 0; i < expect.size(); ++i) {
      EXPECT_NEAR(ref[i], expect[i], 1e-12 * scale) << c["irreps1"] << " value " << i;
      EXPECT_NEAR(out.data()[i], expect[i], 1e-12 * scale) << c["irreps1"] << " value " << i;
    }
  }
}

using test::random_graph;

template <class T>
class ChannelwiseTPTyped : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ChannelwiseTPTyped, Dtypes);

TYPED_TEST(ChannelwiseTPTyped, KokkosForwardAndReverseMatchReference) {
  using T = TypeParam;
  using M = Kokkos::View<T**, Kokkos::LayoutRight, Exec>;
  const std::vector<ChannelwiseTP> tps = {
      ChannelwiseTP::mace(Irreps::parse("5x0e"), Irreps::spherical_harmonics(3), mace_target(3, 5)),
      ChannelwiseTP::mace(Irreps::parse("5x0e+5x1o"), Irreps::spherical_harmonics(3), mace_target(3, 5)),
      ChannelwiseTP::mace(Irreps::parse("3x0e+3x1o+3x2e"), Irreps::spherical_harmonics(3), mace_target(3, 3))};
  for (const auto& tp : tps) {
    const ChannelwiseTPKokkos<Exec, T> k(tp);
    for (int N : test::test_sizes()) {
      const int nodes = std::min(N, 200), edges = nodes * 7;
      const auto rg = random_graph(nodes, edges, 11 + N);
      const auto g = EdgeIndex<Exec>::build(nodes, rg.sender, rg.receiver);
      test::Uniform u(N + 5);
      auto fill = [&](M m) {
        for (std::size_t i = 0; i < m.size(); ++i) {
          m.data()[i] = static_cast<T>(u(-1, 1));
        }
        return m;
      };
      M x = fill(M("x", nodes, tp.dim1())), Y = fill(M("Y", edges, tp.dim2())), w = fill(M("w", edges, tp.weight_numel));
      M gout = fill(M("g", nodes, tp.dim_out()));
      M out("out", nodes, tp.dim_out()), gx("gx", nodes, tp.dim1()), gY("gY", edges, tp.dim2()),
          gw("gw", edges, tp.weight_numel);
      Kokkos::deep_copy(out, T(777));
      Kokkos::deep_copy(gY, T(777));
      Kokkos::deep_copy(gw, T(777));
      k.compute(g, x, Y, w, out);
      k.reverse(g, x, Y, w, gout, gx, gY, gw);

      std::vector<T> ro(out.size()), rgx(gx.size()), rgY(gY.size()), rgw(gw.size());
      reference::compute_channelwise_tp(tp, nodes, edges, rg.sender.data(), rg.receiver.data(), x.data(), Y.data(),
                                        w.data(), ro.data());
      reference::reverse_channelwise_tp(tp, nodes, edges, rg.sender.data(), rg.receiver.data(), x.data(), Y.data(),
                                        w.data(), gout.data(), rgx.data(), rgY.data(), rgw.data());
      // Sums of up to ~7 edges x ~75 CG terms of O(1) values.
      const double tol = test::Tolerance<T>::kernel * 100;
      auto compare = [&](const M& a, const std::vector<T>& b, const char* what) {
        for (std::size_t i = 0; i < b.size(); ++i) {
          ASSERT_NEAR(a.data()[i], b[i], tol * std::max(1.0, std::abs(double(b[i])))) << what << " " << i << " N " << N;
        }
      };
      compare(out, ro, "out");
      compare(gx, rgx, "grad_x");
      compare(gY, rgY, "grad_Y");
      compare(gw, rgw, "grad_w");
    }
  }
}

// The reference reverse is itself checked against central differences of the forward.
TEST(ChannelwiseTP, ReferenceReverseMatchesFiniteDifferences) {
  const auto tp = ChannelwiseTP::mace(Irreps::parse("2x0e+2x1o"), Irreps::spherical_harmonics(2), mace_target(2, 2));
  const int N = 4, E = 9;
  const auto rg = random_graph(N, E, 3);
  test::Uniform u(9);
  std::vector<double> x(N * tp.dim1()), Y(E * tp.dim2()), w(E * tp.weight_numel), g(N * tp.dim_out());
  for (auto* v : {&x, &Y, &w, &g}) {
    for (double& a : *v) {
      a = u(-1, 1);
    }
  }
  std::vector<double> gx(x.size()), gY(Y.size()), gw(w.size());
  reference::reverse_channelwise_tp(tp, N, E, rg.sender.data(), rg.receiver.data(), x.data(), Y.data(), w.data(),
                                    g.data(), gx.data(), gY.data(), gw.data());
  auto loss = [&]() {
    std::vector<double> out(N * tp.dim_out());
    reference::compute_channelwise_tp(tp, N, E, rg.sender.data(), rg.receiver.data(), x.data(), Y.data(), w.data(),
                                      out.data());
    double s = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      s += out[i] * g[i];
    }
    return s;
  };
  const double h = 1e-6;
  for (auto [v, grad] : {std::pair{&x, &gx}, std::pair{&Y, &gY}, std::pair{&w, &gw}}) {
    for (std::size_t i = 0; i < v->size(); i += 3) {
      const double keep = (*v)[i];
      (*v)[i] = keep + h;
      const double lp = loss();
      (*v)[i] = keep - h;
      const double lm = loss();
      (*v)[i] = keep;
      EXPECT_NEAR((*grad)[i], (lp - lm) / (2 * h), 1e-7) << "index " << i;
    }
  }
}

// Rotating the node features and the edge harmonics by R rotates the messages by D(R).
TEST(ChannelwiseTP, IsEquivariant) {
  const auto tp = ChannelwiseTP::mace(Irreps::parse("3x0e+3x1o+3x2e"), Irreps::spherical_harmonics(3), mace_target(3, 3));
  const ChannelwiseTPKokkos<Exec, double> k(tp);
  const int N = 5, E = 14;
  const auto rg = random_graph(N, E, 21);
  const auto g = EdgeIndex<Exec>::build(N, rg.sender, rg.receiver);
  test::Uniform u(4);
  Matrix x("x", N, tp.dim1()), Y("Y", E, tp.dim2()), w("w", E, tp.weight_numel);
  for (auto m : {x, Y, w}) {
    for (std::size_t i = 0; i < m.size(); ++i) {
      m.data()[i] = u(-1, 1);
    }
  }
  const auto R = rotation_from_euler(0.3, 1.1, -0.7);
  auto rotate = [&](const Irreps& irreps, const Matrix& m) {
    const auto D = wigner_D(irreps, R);  // [dim x dim], row-major
    const int d = irreps.dim();
    Matrix r("r", m.extent(0), d);
    for (std::size_t a = 0; a < m.extent(0); ++a) {
      for (int i = 0; i < d; ++i) {
        double s = 0;
        for (int j = 0; j < d; ++j) {
          s += D[i * d + j] * m(a, j);
        }
        r(a, i) = s;
      }
    }
    return r;
  };
  Matrix out("out", N, tp.dim_out()), out_rot("out_rot", N, tp.dim_out());
  k.compute(g, x, Y, w, out);
  k.compute(g, rotate(tp.irreps1, x), rotate(tp.irreps2, Y), w, out_rot);
  const Matrix expect = rotate(tp.irreps_out, out);
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out_rot.data()[i], expect.data()[i], 1e-12 * 20) << "component " << i;
  }
}

TEST(ChannelwiseTP, BadInputIsAClearError) {
  EXPECT_THROW(ChannelwiseTP::mace(Irreps::parse("2x0e"), Irreps::parse("2x0e+1x1o"), Irreps::parse("2x0e")), InputError);
  EXPECT_THROW(ChannelwiseTP::mace(Irreps::parse("2x0e"), Irreps::parse("1x5o"), Irreps::parse("2x5o")), InputError);
  EXPECT_THROW(EdgeIndex<Exec>::build(3, {0, 1}, {2, 1}), InputError);   // not sorted by receiver
  EXPECT_THROW(EdgeIndex<Exec>::build(3, {0, 7}, {1, 1}), InputError);   // sender out of range
  const auto tp = ChannelwiseTP::mace(Irreps::parse("2x0e"), Irreps::spherical_harmonics(1), mace_target(1, 2));
  const ChannelwiseTPKokkos<Exec, double> k(tp);
  const auto g = EdgeIndex<Exec>::build(2, {0}, {1});
  Matrix x("x", 2, tp.dim1()), Y("Y", 1, tp.dim2()), w("w", 1, tp.weight_numel + 1), out("o", 2, tp.dim_out());
  EXPECT_THROW(k.compute(g, x, Y, w, out), InputError);
}

// The index built from edge arrays where they already live (what the trainer builds from a
// batch's labels on its device) is the one a serial count and stable transpose give, reads the
// arrays in place, and names the first bad edge.
TEST(EdgeIndexFromEdges, EqualsTheSerialIndexAndReadsTheArraysInPlace) {
  using Labels = Kokkos::View<int*, Exec>;
  for (int N : test::test_sizes()) {
    const int nodes = std::min(N, 300), edges = nodes * 5 + 3 * (N % 2);
    const auto rg = random_graph(nodes, nodes == 0 ? 0 : edges, 97 + N);
    const int E = static_cast<int>(rg.sender.size());
    Labels snd("s", E), rcv("r", E);
    std::copy(rg.sender.begin(), rg.sender.end(), snd.data());
    std::copy(rg.receiver.begin(), rg.receiver.end(), rcv.data());
    EdgeIndexStorage<Exec> storage;
    const auto g = EdgeIndex<Exec>::from_edges(nodes, snd, rcv, storage);
    ASSERT_EQ(g.num_nodes, nodes);
    ASSERT_EQ(g.num_receivers, nodes);
    ASSERT_EQ(g.num_edges, E);
    EXPECT_EQ(g.sender.data(), snd.data());
    EXPECT_EQ(g.receiver.data(), rcv.data());
    std::vector<int> rptr(nodes + 1, 0), sptr(nodes + 1, 0), sedges;
    for (int e = 0; e < E; ++e) {
      ++rptr[rg.receiver[e] + 1];
      ++sptr[rg.sender[e] + 1];
    }
    for (int n = 0; n < nodes; ++n) {
      rptr[n + 1] += rptr[n];
      sptr[n + 1] += sptr[n];
    }
    for (int s = 0; s < nodes; ++s) {
      for (int e = 0; e < E; ++e) {
        if (rg.sender[e] == s) {
          sedges.push_back(e);
        }
      }
    }
    for (int n = 0; n <= nodes; ++n) {
      ASSERT_EQ(g.receiver_ptr(n), rptr[n]) << "N " << N << " node " << n;
      ASSERT_EQ(g.sender_ptr(n), sptr[n]) << "N " << N << " node " << n;
    }
    for (int e = 0; e < E; ++e) {
      ASSERT_EQ(g.sender_edges(e), sedges[e]) << "N " << N << " edge " << e;
    }
  }
}

TEST(EdgeIndexFromEdges, NamesTheFirstBadEdge) {
  const auto message = [](int nodes, std::vector<int> s, std::vector<int> r) {
    Kokkos::View<int*, Exec> snd("s", s.size()), rcv("r", r.size());
    std::copy(s.begin(), s.end(), snd.data());
    std::copy(r.begin(), r.end(), rcv.data());
    EdgeIndexStorage<Exec> storage;
    try {
      EdgeIndex<Exec>::from_edges(nodes, snd, rcv, storage, "batch 7");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(4, {0, 1, 2, 3}, {0, 2, 1, 0}),
            "batch 7: edges must be sorted by receiver; edge 2 has receiver 1 after 2");
  EXPECT_EQ(message(4, {0, 1, 9, 3}, {0, 1, 2, 0}), "batch 7: edge 2 (9 -> 2) names a node outside 0..3");
  EXPECT_EQ(message(4, {0, 1}, {0, -1}), "batch 7: edge 1 (1 -> -1) names a node outside 0..3");
  EXPECT_EQ(message(4, {0, 1}, {0}), "batch 7: 2 senders but 1 receivers");
  EXPECT_EQ(message(0, {}, {}), "no error");
  // build() from host vectors runs the same check.
  try {
    EdgeIndex<Exec>::build(3, {0, 1}, {2, 1});
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "EdgeIndex::build: edges must be sorted by receiver; edge 1 has receiver 1 after 2");
  }
}

}  // namespace
}  // namespace fastmlip::kernels

namespace fastmlip::kernels {
namespace {

// A radial table (r_max 4 A, knots 0.02 A apart from 0.05 A) of a random radial MLP with
// `width` outputs.
RadialTable random_table(int width, std::uint64_t seed) {
  return RadialTable::build(RadialBasisParams::mace(6, 4.0, 5),
                            test::random_radial_mlp({6, 9, width}, 1.68, seed), 0.02, 0.05);
}

// Weights evaluated from a radial table inside the TP kernels agree with the same weights
// passed as an [edges x weight_numel] array (RadialTableKokkos::compute), and the fused edge
// gradient with dR/dr contracted in the kernel agrees with grad_w through RadialTableKokkos::
// reverse. Odd sizes, node irreps with l = 0 and 1, edges beyond r_max.
template <class T>
class ChannelwiseTPTabulated : public ::testing::Test {};
using TabDtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ChannelwiseTPTabulated, TabDtypes);

TYPED_TEST(ChannelwiseTPTabulated, MatchesTheTableEvaluatedSeparately) {
  using T = TypeParam;
  using M = Kokkos::View<T**, Kokkos::LayoutRight, Exec>;
  using V = Kokkos::View<T*, Exec>;
  const auto tp = ChannelwiseTP::mace(Irreps::parse("5x0e+5x1o"), Irreps::spherical_harmonics(2), mace_target(2, 5));
  const auto table = random_table(tp.weight_numel, 3);
  const RadialTableKokkos<Exec, T> tab(table);
  const ChannelwiseTPKokkos<Exec, T> k(tp);
  for (int N : {1, 13, 40}) {
    const auto rg = random_graph(N, 3 * N + 1, N + 5);
    const int E = static_cast<int>(rg.sender.size());
    const auto g = EdgeIndex<Exec>::build(N, rg.sender, rg.receiver);
    test::Uniform u(N);
    M x("x", N, tp.dim1()), Y("Y", E, tp.dim2()), go("go", N, tp.dim_out()), w("w", E, tp.weight_numel);
    V r("r", E);
    for (std::size_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<T>(u(-1, 1));
    for (std::size_t i = 0; i < Y.size(); ++i) Y.data()[i] = static_cast<T>(u(-1, 1));
    for (std::size_t i = 0; i < go.size(); ++i) go.data()[i] = static_cast<T>(u(-1, 1));
    for (int e = 0; e < E; ++e) r(e) = static_cast<T>(u(0.05, 4.4));  // some beyond r_max = 4
    tab.compute(r, w);
    M out_a("a", N, tp.dim_out()), out_b("b", N, tp.dim_out());
    k.compute(g, x, Y, w, out_a);
    k.compute(g, x, Y, tab, r, out_b);
    M gx_a("gxa", N, tp.dim1()), gx_b("gxb", N, tp.dim1()), gY_a("gYa", E, tp.dim2()), gY_b("gYb", E, tp.dim2());
    M gw("gw", E, tp.weight_numel);
    V gr_a("gra", E), gr_b("grb", E);
    k.reverse(g, x, Y, w, go, gx_a, gY_a, gw);
    tab.reverse(r, gw, gr_a);
    Kokkos::deep_copy(gr_b, T(777));
    k.reverse(g, x, Y, tab, r, go, gx_b, gY_b, gr_b);
    const double tol = std::is_same_v<T, double> ? 1e-12 : 2e-5;
    auto near = [&](const auto& a, const auto& b, const char* what) {
      double scale = 1e-30;
      for (std::size_t i = 0; i < a.size(); ++i) scale = std::max(scale, std::abs(static_cast<double>(a.data()[i])));
      for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_NEAR(static_cast<double>(b.data()[i]), static_cast<double>(a.data()[i]), tol * scale)
            << what << " " << i << " (" << N << " nodes)";
      }
    };
    near(out_a, out_b, "out");
    near(gx_a, gx_b, "grad_x");
    near(gY_a, gY_b, "grad_Y");
    near(gr_a, gr_b, "grad_r");
  }
  // Wrong table width, and an edge below the table.
  const auto tp2 = ChannelwiseTP::mace(Irreps::parse("2x0e"), Irreps::spherical_harmonics(1), mace_target(1, 2));
  const ChannelwiseTPKokkos<Exec, T> k2(tp2);
  const auto g1 = EdgeIndex<Exec>::build(1, std::vector<int>{0}, std::vector<int>{0});
  M x1("x", 1, tp2.dim1()), Y1("Y", 1, tp2.dim2()), o1("o", 1, tp2.dim_out());
  V r1("r", 1);
  r1(0) = T(1);
  EXPECT_THROW(k2.compute(g1, x1, Y1, tab, r1, o1), InputError);
  r1(0) = T(0.01);
  EXPECT_THROW(k.compute(g1, M("x", 1, tp.dim1()), M("Y", 1, tp.dim2()), tab, r1, M("o", 1, tp.dim_out())), InputError);
}

// Lanes split each row's channels over several work items (a warp per row on a GPU, where
// ChannelwiseTPKokkos picks 32; 1 on the host). Here the host runs 3 lanes (not dividing 5
// channels) and 32 (more lanes than channels) against one. Each channel's sums run in the same
// order, so out, grad_x, grad_w and the tabulated weights are bitwise equal; grad_Y and grad_r
// add the lanes' shares, so they agree to round-off. Outputs start as garbage: a lane must
// zero what it owns.
template <class T>
class ChannelwiseTPLanes : public ::testing::Test {};
TYPED_TEST_SUITE(ChannelwiseTPLanes, Dtypes);

template <class T, int Lanes>
void check_lanes() {
  using M = Kokkos::View<T**, Kokkos::LayoutRight, Exec>;
  using V = Kokkos::View<T*, Exec>;
  const auto tp =
      ChannelwiseTP::mace(Irreps::parse("5x0e+5x1o+5x2e"), Irreps::spherical_harmonics(3), mace_target(3, 5));
  const RadialTableKokkos<Exec, T> tab(random_table(tp.weight_numel, 7));
  const ChannelwiseTPKokkos<Exec, T, 1> one(tp);
  const ChannelwiseTPKokkos<Exec, T, Lanes> many(tp);
  for (int N : {1, 13, 41}) {
    const auto rg = random_graph(N, 5 * N + 2, 3 * N + Lanes);
    const int E = static_cast<int>(rg.sender.size());
    const auto g = EdgeIndex<Exec>::build(N, rg.sender, rg.receiver);
    test::Uniform u(N + Lanes);
    auto fill = [&](auto m, double lo, double hi) {
      for (std::size_t i = 0; i < m.size(); ++i) {
        m.data()[i] = static_cast<T>(u(lo, hi));
      }
      return m;
    };
    const M x = fill(M("x", N, tp.dim1()), -1, 1), Y = fill(M("Y", E, tp.dim2()), -1, 1),
            w = fill(M("w", E, tp.weight_numel), -1, 1), go = fill(M("go", N, tp.dim_out()), -1, 1);
    const V r = fill(V("r", E), 0.05, 4.4);  // some beyond r_max = 4
    auto garbage = [](auto m) {
      Kokkos::deep_copy(m, T(777));
      return m;
    };
    const std::string at = " (" + std::to_string(Lanes) + " lanes, " + std::to_string(N) + " nodes)";
    auto same = [&](const auto& a, const auto& b, const char* what) {
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a.data()[i], b.data()[i]) << what << " " << i << at;
      }
    };
    auto near = [&](const auto& a, const auto& b, const char* what) {
      double scale = 1e-30;
      for (std::size_t i = 0; i < a.size(); ++i) {
        scale = std::max(scale, std::abs(static_cast<double>(a.data()[i])));
      }
      const double tol = (std::is_same_v<T, double> ? 1e-13 : 2e-5) * scale;
      for (std::size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(static_cast<double>(b.data()[i]), static_cast<double>(a.data()[i]), tol)
            << what << " " << i << at;
      }
    };
    for (const bool tabulated : {false, true}) {
      M o1 = garbage(M("o1", N, tp.dim_out())), oL = garbage(M("oL", N, tp.dim_out()));
      M gx1 = garbage(M("gx1", N, tp.dim1())), gxL = garbage(M("gxL", N, tp.dim1()));
      M gY1 = garbage(M("gY1", E, tp.dim2())), gYL = garbage(M("gYL", E, tp.dim2()));
      M gw1 = garbage(M("gw1", E, tp.weight_numel)), gwL = garbage(M("gwL", E, tp.weight_numel));
      V gr1 = garbage(V("gr1", E)), grL = garbage(V("grL", E));
      if (tabulated) {
        one.compute(g, x, Y, tab, r, o1);
        many.compute(g, x, Y, tab, r, oL);
        one.reverse(g, x, Y, tab, r, go, gx1, gY1, gr1);
        many.reverse(g, x, Y, tab, r, go, gxL, gYL, grL);
        near(gr1, grL, "grad_r");
      } else {
        one.compute(g, x, Y, w, o1);
        many.compute(g, x, Y, w, oL);
        one.reverse(g, x, Y, w, go, gx1, gY1, gw1);
        many.reverse(g, x, Y, w, go, gxL, gYL, gwL);
        same(gw1, gwL, "grad_w");
      }
      same(o1, oL, tabulated ? "out (tabulated)" : "out");
      same(gx1, gxL, tabulated ? "grad_x (tabulated)" : "grad_x");
      near(gY1, gYL, tabulated ? "grad_Y (tabulated)" : "grad_Y");
    }
  }
}

TYPED_TEST(ChannelwiseTPLanes, SplitTheChannelsAsOneThreadDoes) {
  static_assert(impl::kTPLanes<Exec> == 1, "the host takes whole rows");
  check_lanes<TypeParam, 3>();
  check_lanes<TypeParam, 32>();
}

// The chunked passes (EdgeIndex::chunk, compute_chunk / reverse_chunk) against compute() and
// reverse() on the whole index: the same sums in the same order, so the same bits, for chunks
// of one receiver, of a few, of none of the edges, and for the whole as one chunk.
template <class T, int Lanes>
void check_chunks() {
  using M = Kokkos::View<T**, Kokkos::LayoutRight, Exec>;
  const auto tp =
      ChannelwiseTP::mace(Irreps::parse("3x0e+3x1o+3x2e"), Irreps::spherical_harmonics(3), mace_target(3, 3));
  const ChannelwiseTPKokkos<Exec, T, Lanes> k(tp);
  for (int N : {1, 7, 40}) {
    const auto rg = random_graph(N, 6 * N + 1, 5 * N + Lanes);
    const int E = static_cast<int>(rg.sender.size());
    const auto g = EdgeIndex<Exec>::build(N, rg.sender, rg.receiver);
    test::Uniform u(N + 17);
    auto fill = [&](M m) {
      for (std::size_t i = 0; i < m.size(); ++i) {
        m.data()[i] = static_cast<T>(u(-1, 1));
      }
      return m;
    };
    const M x = fill(M("x", N, tp.dim1())), Y = fill(M("Y", E, tp.dim2())),
            w = fill(M("w", E, tp.weight_numel)), go = fill(M("go", N, tp.dim_out()));
    M out("out", N, tp.dim_out()), gx("gx", N, tp.dim1()), gY("gY", E, tp.dim2()),
        gw("gw", E, tp.weight_numel);
    k.compute(g, x, Y, w, out);
    k.reverse(g, x, Y, w, go, gx, gY, gw);
    const std::vector<int> ptr = test::receiver_offsets(rg.receiver, N);
    for (const int per_chunk : {1, 3, N}) {  // receivers per chunk
      const std::string at = " (" + std::to_string(Lanes) + " lanes, " + std::to_string(N) + " nodes, " +
                             std::to_string(per_chunk) + " receivers a chunk)";
      M cout("cout", N, tp.dim_out()), cgx("cgx", N, tp.dim1());
      M cgY("cgY", E, tp.dim2()), cgw("cgw", E, tp.weight_numel);
      Kokkos::deep_copy(cout, T(777));
      Kokkos::deep_copy(cgY, T(777));
      Kokkos::deep_copy(cgw, T(777));
      test::run_tp_in_chunks(k, g, ptr, per_chunk, x, Y, w, go, cout, cgx, cgY, cgw);
      auto same = [&](const M& a, const M& b, const char* what) {
        for (std::size_t i = 0; i < a.size(); ++i) {
          ASSERT_EQ(a.data()[i], b.data()[i]) << what << " " << i << at;
        }
      };
      same(out, cout, "out");
      same(gx, cgx, "grad_x");
      same(gY, cgY, "grad_Y");
      same(gw, cgw, "grad_w");
    }
  }
  // A chunk outside the index is refused, naming the edges.
  const auto g = EdgeIndex<Exec>::build(2, {0, 1}, {0, 1});
  EdgeIndexStorage<Exec> storage;
  EXPECT_THROW(EdgeIndex<Exec>::chunk(g, 1, 3, storage), InputError);
  EXPECT_THROW(k.compute_chunk(EdgeIndex<Exec>::chunk(g, 0, 1, storage), 0, 3, M("Y", 1, tp.dim2()),
                               M("w", 1, tp.weight_numel), M("o", 2, tp.dim_out())),
               InputError);
}

TYPED_TEST(ChannelwiseTPLanes, ChunksOfReceiversGiveTheWholeIndexsBits) {
  check_chunks<TypeParam, 1>();
  check_chunks<TypeParam, 3>();
}

}  // namespace
}  // namespace fastmlip::kernels
