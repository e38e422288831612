// SPDX-License-Identifier: MIT
// The graph contract (graph/atom_graph.hpp) and its two stages: GraphBuilder (positions and a
// full neighbor list -> AtomGraph, the forward stage) against a naive filter of the same list,
// and tally_edges (dE/dv -> forces and virials, its reverse) against a naive loop and against
// finite differences of an energy of the edge vectors, in positions and in strain. Typed over
// float and double, sizes {0, 1, 13, large}, with ghosts, a list in shuffled order that skips
// some atoms, entries beyond the cutoff and special bits set; then check_graph's errors and the
// edge index the models build from a graph.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "../common/error_text.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "graph/atom_graph.hpp"
#include "graph/edge_tally.hpp"
#include "graph/graph_builder.hpp"
#include "kernels/edge_index.hpp"

namespace fastmlip::graph {
namespace {

using test::error_of;
using Exec = Kokkos::DefaultHostExecutionSpace;
constexpr int kSpecialBits = 0x60000000;  // what LAMMPS keeps above its NEIGHMASK
constexpr int kMask = 0x1FFFFFFF;

/// A full neighbor list in the shape the builder reads (LAMMPS': ilist, numneigh, rows of
/// neighbor indices carrying special bits), held in vectors.
struct ListData {
  std::vector<int> ilist, numneigh, offset, entries;
};
struct TestNeighbors {
  int inum = 0;
  const int* ilist = nullptr;
  const int* numneigh = nullptr;
  const int* offset = nullptr;
  const int* entries = nullptr;
  int atom(int ii) const { return ilist[ii]; }
  int count(int i) const { return numneigh[i]; }
  int neighbor(int i, int jj) const { return entries[offset[i] + jj] & kMask; }
};

/// n local atoms and about n/3 ghosts in a box, two types; a list of every pair within
/// cutoff + skin for a shuffled subset of the local atoms (every 7th is left out, as
/// neigh_modify include does), some entries with special bits.
struct System {
  int n_local = 0, n_total = 0;
  std::vector<double> x;  // [n_total][3]
  std::vector<int> type;  // [n_total], 1-based
  ListData list;
  double cutoff = 3.0, skin = 0.7;

  TestNeighbors neighbors() const {
    return {static_cast<int>(list.ilist.size()), list.ilist.data(), list.numneigh.data(), list.offset.data(),
            list.entries.data()};
  }
  Kokkos::View<const double* [3], Kokkos::LayoutRight, Kokkos::HostSpace> positions() const {
    return Kokkos::View<const double* [3], Kokkos::LayoutRight, Kokkos::HostSpace>(x.data(), n_total);
  } Kokkos::View<const int*, Kokkos::HostSpace> types() const {
    return Kokkos::View<const int*, Kokkos::HostSpace>(type.data(), type.size());
  }
};

System make_system(int n, std::uint64_t seed) {
  Rng rng{seed};
  System s;
  s.n_local = n;
  s.n_total = n == 0 ? 0 : n + n / 3 + 2;
  const double side = std::cbrt(std::max(1, s.n_total) * 9.0);  // about 1 atom per 9 A^3
  // Rejection keeps atoms at least 0.8 A apart: the builder refuses closer pairs.
  while (static_cast<int>(s.x.size()) < 3 * s.n_total) {
    const double p[3] = {rng.uniform(0, side), rng.uniform(0, side), rng.uniform(0, side)};
    bool ok = true;
    for (std::size_t j = 0; j < s.x.size() && ok; j += 3) {
      const double d2 = (p[0] - s.x[j]) * (p[0] - s.x[j]) + (p[1] - s.x[j + 1]) * (p[1] - s.x[j + 1]) +
                        (p[2] - s.x[j + 2]) * (p[2] - s.x[j + 2]);
      ok = d2 > 0.64;
    }
    if (ok) {
      s.x.insert(s.x.end(), p, p + 3);
      s.type.push_back(1 + static_cast<int>(rng.uniform(0, 2)) % 2);
    }
  }
  for (int i = 0; i < n; ++i) {
    if (i % 7 != 3) {
      s.list.ilist.push_back(i);
    }
  }
  for (std::size_t k = s.list.ilist.size(); k > 1; --k) {  // Fisher-Yates from the portable stream
    std::swap(s.list.ilist[k - 1], s.list.ilist[static_cast<std::size_t>(rng.uniform(0, 1) * k) % k]);
  }
  s.list.numneigh.assign(s.n_total, 0);
  s.list.offset.assign(s.n_total, 0);
  const double reach = s.cutoff + s.skin;
  for (int i = 0; i < n; ++i) {
    s.list.offset[i] = static_cast<int>(s.list.entries.size());
    std::vector<int> row;
    for (int j = 0; j < s.n_total; ++j) {
      double d2 = 0;
      for (int k = 0; k < 3; ++k) {
        d2 += (s.x[3 * j + k] - s.x[3 * i + k]) * (s.x[3 * j + k] - s.x[3 * i + k]);
      }
      if (j != i && d2 < reach * reach) {
        row.push_back(j | (rng.uniform(0, 1) < 0.2 ? kSpecialBits : 0));
      }
    }
    std::reverse(row.begin(), row.end());  // not in index order
    s.list.numneigh[i] = static_cast<int>(row.size());
    s.list.entries.insert(s.list.entries.end(), row.begin(), row.end());
  }
  return s;
}

const std::vector<int> kTypeSpecies{-1, 1, 0};  // type 1 -> species 1, type 2 -> species 0

template <class T>
AtomGraph<T> build(GraphBuilder<Exec, T>& b, const System& s) {
  return b.build(s.positions(), s.neighbors(), s.types(),
                 Kokkos::View<const int*, Kokkos::HostSpace>(kTypeSpecies.data(), kTypeSpecies.size()),
                 s.n_local, s.n_total, s.cutoff, 0.5);
}

template <class T>
class GraphBuilderTest : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GraphBuilderTest, Precisions);

TYPED_TEST(GraphBuilderTest, BuildsTheListsEdgesWithinTheCutoffGroupedByCentre) {
  using T = TypeParam;
  for (const int n : {0, 1, 13, 500}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const System s = make_system(n, 11 + n);
    GraphBuilder<Exec, T> builder;
    const AtomGraph<T> g = build(builder, s);

    // The naive twin: each local atom in index order, its listed neighbors in list order.
    std::vector<int> center, neighbor, start{0};
    std::vector<T> vec;
    std::vector<bool> listed(n, false);
    for (int i : s.list.ilist) {
      listed[i] = true;
    }
    for (int i = 0; i < n; ++i) {
      for (int jj = 0; listed[i] && jj < s.list.numneigh[i]; ++jj) {
        const int j = s.list.entries[s.list.offset[i] + jj] & kMask;
        const double d[3] = {s.x[3 * j] - s.x[3 * i], s.x[3 * j + 1] - s.x[3 * i + 1],
                             s.x[3 * j + 2] - s.x[3 * i + 2]};
        if (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] < s.cutoff * s.cutoff) {
          center.push_back(i);
          neighbor.push_back(j);
          for (double c : d) {
            vec.push_back(static_cast<T>(c));
          }
        }
      }
      start.push_back(static_cast<int>(center.size()));
    }
    if (n >= 13) {
      ASSERT_GT(center.size(), static_cast<std::size_t>(n));  // the case has real neighborhoods
    }
    ASSERT_EQ(g.n_local, n);
    ASSERT_EQ(g.n_total, s.n_total);
    ASSERT_EQ(g.num_edges(), static_cast<int>(center.size()));
    ASSERT_EQ(static_cast<int>(g.center_start.extent(0)), n + 1);
    for (int i = 0; i <= n; ++i) {
      EXPECT_EQ(g.center_start(i), start[i]) << i;
    }
    for (int e = 0; e < g.num_edges(); ++e) {
      EXPECT_EQ(g.center(e), center[e]) << e;
      EXPECT_EQ(g.neighbor(e), neighbor[e]) << e;
      for (int k = 0; k < 3; ++k) {
        EXPECT_EQ(g.vectors(e, k), vec[3 * e + k]) << e;  // the same cast
      }
    }
    for (int a = 0; a < s.n_total; ++a) {
      EXPECT_EQ(g.species(a), kTypeSpecies[s.type[a]]) << a;
    }
    EXPECT_NO_THROW(check_graph(g, 2, "test", ""));

    // A second, smaller build into the same (grow-only) buffers gives that graph exactly.
    const System t = make_system(n / 2, 5);
    const AtomGraph<T> h = build(builder, t);
    GraphBuilder<Exec, T> fresh;
    const AtomGraph<T> h2 = build(fresh, t);
    ASSERT_EQ(h.num_edges(), h2.num_edges());
    for (int e = 0; e < h.num_edges(); ++e) {
      EXPECT_EQ(h.neighbor(e), h2.neighbor(e));
      EXPECT_EQ(h.vectors(e, 2), h2.vectors(e, 2));
    }
  }
}

TYPED_TEST(GraphBuilderTest, APairExactlyAtTheCutoffIsNoEdge) {
  using T = TypeParam;
  System s;
  s.n_local = s.n_total = 3;
  s.x = {0, 0, 0, 3.0, 0, 0, 1.5, 0, 0};  // 0-1 exactly 3.0 A apart (the cutoff), 2 in between
  s.type = {1, 1, 2};
  s.list.ilist = {0, 1, 2};
  s.list.numneigh = {2, 2, 2};
  s.list.offset = {0, 2, 4};
  s.list.entries = {1, 2, 0, 2, 0, 1};
  GraphBuilder<Exec, T> builder;
  const AtomGraph<T> g = build(builder, s);
  ASSERT_EQ(g.num_edges(), 4);
  const std::vector<std::pair<int, int>> expected{{0, 2}, {1, 2}, {2, 0}, {2, 1}};
  for (int e = 0; e < 4; ++e) {
    EXPECT_EQ(std::make_pair(g.center(e), g.neighbor(e)), expected[e]) << e;
  }
}

TYPED_TEST(GraphBuilderTest, RefusesAtomsCloserThanTheMinimumNamingThem) {
  using T = TypeParam;
  System s = make_system(13, 3);
  // Atom 5 moved to 0.3 A of atom 9 (local, listed: 9 % 7 != 3).
  for (int k = 0; k < 3; ++k) {
    s.x[3 * 5 + k] = s.x[3 * 9 + k] + (k == 1 ? 0.3 : 0.0);
  }
  s = [&] {  // relist with the new positions
    System r = s;
    r.list = {};
    r.list.ilist = s.list.ilist;
    r.list.numneigh.assign(r.n_total, 0);
    r.list.offset.assign(r.n_total, 0);
    for (int i = 0; i < r.n_local; ++i) {
      r.list.offset[i] = static_cast<int>(r.list.entries.size());
      for (int j = 0; j < r.n_total; ++j) {
        double d2 = 0;
        for (int k = 0; k < 3; ++k) {
          d2 += (r.x[3 * j + k] - r.x[3 * i + k]) * (r.x[3 * j + k] - r.x[3 * i + k]);
        }
        if (j != i && d2 < 16) {
          r.list.entries.push_back(j);
          ++r.list.numneigh[i];
        }
      }
    }
    return r;
  }();
  GraphBuilder<Exec, T> builder;
  try {
    build(builder, s);
    FAIL() << "no ClosePairError";
  } catch (const ClosePairError& e) {
    EXPECT_EQ(std::min(e.atom_i, e.atom_j), 5);
    EXPECT_EQ(std::max(e.atom_i, e.atom_j), 9);
    EXPECT_NEAR(e.distance_sq, 0.09, 1e-12);
  }
  // The builder is usable again on a structure without close atoms.
  EXPECT_NO_THROW(build(builder, make_system(13, 3)));
}

// ---- tally_edges ----------------------------------------------------------------------------

/// An energy of the edge vectors with a non-trivial gradient: E = sum_e phi(v_e),
/// phi(v) = a . v + b |v|^2 + c |v|^4 (a, b, c per edge).
struct EdgeEnergy {
  std::vector<double> a, b, c;
  double value(const std::vector<int>& center, const std::vector<int>& neighbor,
               const std::vector<double>& x) const {
    double E = 0;
    for (std::size_t e = 0; e < center.size(); ++e) {
      double v[3], r2 = 0;
      for (int k = 0; k < 3; ++k) {
        v[k] = x[3 * neighbor[e] + k] - x[3 * center[e] + k];
        r2 += v[k] * v[k];
      }
      E += a[3 * e] * v[0] + a[3 * e + 1] * v[1] + a[3 * e + 2] * v[2] + b[e] * r2 + c[e] * r2 * r2;
    }
    return E;
  }
  template <class T>
  std::vector<T> gradient(const AtomGraph<T>& g) const {
    std::vector<T> out(3 * static_cast<std::size_t>(g.num_edges()));
    for (int e = 0; e < g.num_edges(); ++e) {
      const double v[3] = {g.vectors(e, 0), g.vectors(e, 1), g.vectors(e, 2)};
      const double r2 = v[0] * v[0] + v[1] * v[1] + v[2] * v[2];
      for (int k = 0; k < 3; ++k) {
        out[3 * e + k] = static_cast<T>(a[3 * e + k] + 2 * b[e] * v[k] + 4 * c[e] * r2 * v[k]);
      }
    }
    return out;
  }
};

EdgeEnergy random_energy(int num_edges, std::uint64_t seed) {
  Rng rng{seed};
  EdgeEnergy en;
  for (int e = 0; e < num_edges; ++e) {
    for (int k = 0; k < 3; ++k) {
      en.a.push_back(rng.uniform(-1, 1));
    }
    en.b.push_back(rng.uniform(-0.5, 0.5));
    en.c.push_back(rng.uniform(-0.05, 0.05));
  }
  return en;
}

using Rows3 = Kokkos::View<double* [3], Kokkos::LayoutRight, Kokkos::HostSpace>;
using Rows6 = Kokkos::View<double* [6], Kokkos::LayoutRight, Kokkos::HostSpace>;

TYPED_TEST(GraphBuilderTest, TallyMatchesTheNaiveLoop) {
  using T = TypeParam;
  for (const int n : {0, 1, 13, 500}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const System s = make_system(n, 29 + n);
    GraphBuilder<Exec, T> builder;
    const AtomGraph<T> g = build(builder, s);
    const int E = g.num_edges(), N = g.n_total;
    Rng rng{7};
    std::vector<T> grad(3 * static_cast<std::size_t>(E));
    for (auto& v : grad) {
      v = static_cast<T>(rng.uniform(-1, 1));
    }
    // Forces and per-atom virials start non-zero: the tally adds.
    Rows3 f("f", N);
    Rows6 w("w", N);
    for (int a = 0; a < N; ++a) {
      for (int k = 0; k < 3; ++k) {
        f(a, k) = rng.uniform(-1, 1);
      }
      for (int k = 0; k < 6; ++k) {
        w(a, k) = rng.uniform(-1, 1);
      }
    }
    std::vector<double> f_ref(f.data(), f.data() + 3 * N), w_ref(w.data(), w.data() + 6 * N), W_ref(6, 0.0);
    for (int e = 0; e < E; ++e) {
      const int i = g.center(e), j = g.neighbor(e);
      const double gv[3] = {grad[3 * e], grad[3 * e + 1], grad[3 * e + 2]};
      const double v[3] = {g.vectors(e, 0), g.vectors(e, 1), g.vectors(e, 2)};
      const double we[6] = {-v[0] * gv[0], -v[1] * gv[1], -v[2] * gv[2],
                            -v[0] * gv[1], -v[0] * gv[2], -v[1] * gv[2]};
      for (int k = 0; k < 3; ++k) {
        f_ref[3 * i + k] += gv[k];
        f_ref[3 * j + k] -= gv[k];
      }
      for (int k = 0; k < 6; ++k) {
        W_ref[k] += we[k];
        w_ref[6 * i + k] += 0.5 * we[k];
        w_ref[6 * j + k] += 0.5 * we[k];
      }
    }
    const Kokkos::View<const T* [3], Kokkos::LayoutRight, Kokkos::HostSpace> gview(grad.data(), E);
    const Virial6 W = tally_edges<Exec, T, T>(g, gview, f, w, true);
    for (int q = 0; q < 3 * N; ++q) {
      EXPECT_NEAR(f.data()[q], f_ref[q], 1e-12 * (1 + std::abs(f_ref[q]))) << q;
    }
    for (int q = 0; q < 6 * N; ++q) {
      EXPECT_NEAR(w.data()[q], w_ref[q], 1e-12 * (1 + std::abs(w_ref[q]))) << q;
    }
    for (int k = 0; k < 6; ++k) {
      EXPECT_NEAR(W.v[k], W_ref[k], 1e-12 * (1 + std::abs(W_ref[k]))) << k;
    }

    // Without per-atom virials or the global virial: the same forces, zero virial returned.
    Rows3 f2("f2", N);
    const Virial6 none = tally_edges<Exec, T, T>(g, gview, f2, Rows6(), false);
    for (int k = 0; k < 6; ++k) {
      EXPECT_EQ(none.v[k], 0.0);
    }
    Rows3 f3("f3", N);
    tally_edges<Exec, T, T>(g, gview, f3, Rows6(), true);
    for (int q = 0; q < 3 * N; ++q) {
      EXPECT_EQ(f2.data()[q], f3.data()[q]);
    }
  }
}

// The reverse stage's gradient test: forces are -dE/dx and the virial is -dE/d(strain),
// checked by central differences of an energy of the edge vectors over the built graph.
TEST(EdgeTally, ForcesAndVirialAreTheFiniteDifferenceGradients) {
  const System s = make_system(13, 41);
  GraphBuilder<Exec, double> builder;
  const AtomGraph<double> g = build(builder, s);
  const int E = g.num_edges(), N = g.n_total;
  ASSERT_GT(E, 13);
  std::vector<int> center(E), neighbor(E);
  for (int e = 0; e < E; ++e) {
    center[e] = g.center(e);
    neighbor[e] = g.neighbor(e);
  }
  const EdgeEnergy en = random_energy(E, 3);
  const auto grad = en.gradient(g);
  Rows3 f("f", N);
  const Virial6 W = tally_edges<Exec, double, double>(
      g, Kokkos::View<const double* [3], Kokkos::LayoutRight, Kokkos::HostSpace>(grad.data(), E), f, Rows6(),
      true);
  const double h = 1e-5;
  for (int a = 0; a < N; ++a) {
    for (int k = 0; k < 3; ++k) {
      auto xp = s.x, xm = s.x;
      xp[3 * a + k] += h;
      xm[3 * a + k] -= h;
      const double dE = (en.value(center, neighbor, xp) - en.value(center, neighbor, xm)) / (2 * h);
      EXPECT_NEAR(f(a, k), -dE, test::Tolerance<double>::fd * (1 + std::abs(dE)))
          << "atom " << a << " dir " << k;
    }
  }
  // x -> (1 + eps) x: W_ab = -dE/d(eps_ba), in LAMMPS' order xx yy zz xy xz yz.
  const int comp[6][2] = {{0, 0}, {1, 1}, {2, 2}, {0, 1}, {0, 2}, {1, 2}};
  for (int q = 0; q < 6; ++q) {
    const int a = comp[q][0], b = comp[q][1];
    auto strained = [&](double eps) {
      auto x = s.x;
      for (int n = 0; n < N; ++n) {
        x[3 * n + b] += eps * s.x[3 * n + a];
      }
      return en.value(center, neighbor, x);
    };
    const double dE = (strained(h) - strained(-h)) / (2 * h);
    EXPECT_NEAR(W.v[q], -dE, test::Tolerance<double>::fd * (1 + std::abs(dE))) << q;
  }
}

TEST(EdgeTally, AddsNodeEnergies) {
  std::vector<double> node{1.5, -2.0, 0.25}, out{1, 1, 1, 7};
  tally_node_energies<Exec>(3, Kokkos::View<const double*, Kokkos::HostSpace>(node.data(), 3),
                            Kokkos::View<double*, Kokkos::HostSpace>(out.data(), 4));
  EXPECT_EQ(out, (std::vector<double>{2.5, -1.0, 1.25, 7}));
}

// ---- check_graph --------------------------------------------------------------------------

struct OwnedGraph {
  int n_local = 3, n_total = 4;
  std::vector<int> species{0, 1, 0, 1}, center{0, 0, 1, 2, 2}, neighbor{1, 3, 0, 0, 3}, start{0, 2, 3, 5};
  std::vector<double> vectors{1, 0, 0, 0, 1, 0, -1, 0, 0, 0, 0, 2, 1, 1, 1};
  AtomGraph<double> view() const {
    return host_graph(n_local, n_total, species.data(), static_cast<int>(center.size()), center.data(),
                      neighbor.data(), start.data(), vectors.data());
  }
  std::string error() const {
    return error_of([&] { check_graph(view(), 2, "Who::compute", "note"); });
  }
};

TEST(CheckGraph, AcceptsAValidGraphAndNamesWhatIsWrong) {
  EXPECT_EQ(OwnedGraph{}.error(), "(no error)");
  EXPECT_EQ(center_offsets(3, OwnedGraph{}.center), OwnedGraph{}.start);
  {
    OwnedGraph g;
    g.species[3] = 2;
    EXPECT_EQ(g.error(), "Who::compute: node 3 has species index 2; note");
  }
  {
    OwnedGraph g;
    g.center[3] = 3;  // a ghost as receiver
    EXPECT_EQ(g.error(), "Who::compute: edge 3 has receiver 3, not a local node (0..2)");
  }
  {
    OwnedGraph g;
    std::swap(g.center[1], g.center[2]);  // 0 1 0 2 2: edge 1 is not where the offsets say
    EXPECT_NE(g.error().find("edge 1 (receiver 1) lies outside center_start's range [2, 3)"),
              std::string::npos)
        << g.error();
    EXPECT_NE(g.error().find("sorted by receiver"), std::string::npos) << g.error();
    g.center = {0, 0, 1, 0, 2};  // edges 0-2 and 4 where the offsets say; edge 3 out of order
    EXPECT_NE(g.error().find("edges must be sorted by receiver; edge 3 has receiver 0 after 1"),
              std::string::npos)
        << g.error();
  }
  {
    OwnedGraph g;
    g.neighbor[4] = 4;
    EXPECT_EQ(g.error(), "Who::compute: edge 4 has sender 4, outside 0..3");
  }
  {
    OwnedGraph g;
    g.vectors[3] = g.vectors[4] = g.vectors[5] = 0;
    EXPECT_NE(g.error().find("Who::compute: edge 1 joins nodes 0 and 3 at distance 0"), std::string::npos);
    g.vectors[4] = std::nan("");
    EXPECT_NE(g.error().find("edge 1 joins nodes 0 and 3"), std::string::npos);
    g.vectors[4] = INFINITY;
    EXPECT_NE(g.error().find("edge 1 joins nodes 0 and 3"), std::string::npos);
  }
  {
    OwnedGraph g;
    g.start = {0, 2, 3, 4};  // the last edge is outside every range
    EXPECT_NE(g.error().find("edge 4 (receiver 2) lies outside"), std::string::npos) << g.error();
    g.start = {1, 2, 3, 5};
    EXPECT_NE(g.error().find("edge 0 (receiver 0) lies outside"), std::string::npos) << g.error();
    g.start = {0, 3, 2, 5};
    EXPECT_NE(g.error().find("center_start must be non-decreasing"), std::string::npos) << g.error();
  }
  {
    OwnedGraph g;
    g.n_local = 5;
    EXPECT_NE(g.error().find("need 0 <= n_local <= n_total"), std::string::npos) << g.error();
  }
  {
    OwnedGraph g;
    AtomGraph<double> v = g.view();
    v.species = Kokkos::subview(v.species, Kokkos::pair<int, int>(0, 3));
    const std::string msg = error_of([&] { check_graph(v, 2, "Who::compute", ""); });
    EXPECT_NE(msg.find("graph arrays of the wrong size: species 3 (need n_total 4)"), std::string::npos)
        << msg;
  }
}

// A length floor (MACE's radial tables): the first edge shorter than it is named with the
// caller's reason; an edge exactly at the floor passes; a zero or non-finite edge keeps its own message.
TEST(CheckGraph, LengthFloorNamesTheFirstShortEdge) {
  OwnedGraph g;  // lengths 1, 1, 1, 2, sqrt(3)
  const LengthFloor floor{1.5, "below the floor"};
  const auto check = [&](const OwnedGraph& o) {
    return error_of([&] { check_graph(o.view(), 2, "Who::compute", "", &floor); });
  };
  EXPECT_EQ(check(g), "Who::compute: edge 0 joins nodes 0 and 1 at distance 1.000000 A, below the floor");
  g.vectors = {1.5, 0, 0, 0, 2, 0, -3, 0, 0, 0, 0, 2, 1, 1, 0.5};  // edge 4: 1.5 exactly
  EXPECT_EQ(check(g), "(no error)");
  g.vectors[13] = 0.9;  // edge 4: sqrt(1 + 0.81 + 0.25) = 1.435
  EXPECT_NE(check(g).find("edge 4 joins nodes 2 and 3 at distance 1.43"), std::string::npos) << check(g);
  g.vectors[3] = 0;
  g.vectors[4] = 0;  // edge 1: zero length, before edge 4
  EXPECT_NE(check(g).find("edge 1 joins nodes 0 and 3 at distance 0.000000; coincident atoms"), std::string::npos)
      << check(g);
  EXPECT_EQ(OwnedGraph{}.error(), "(no error)");  // no floor: only zero lengths are refused
}

TEST(CheckGraph, NullArraysAreRefused) {
  OwnedGraph g;
  const auto v = g.view();
  const std::string msg = error_of([&] {
    check_graph(host_graph<double>(3, 4, v.species.data(), 5, nullptr, v.neighbor.data(),
                                   v.center_start.data(), v.vectors.data()),
                2, "Who::compute", "");
  });
  EXPECT_NE(msg.find("a graph array is null"), std::string::npos) << msg;
}

TEST(CheckGraph, EmptyGraphs) {
  std::vector<int> start{0};
  EXPECT_NO_THROW(
      check_graph(host_graph<double>(0, 0, nullptr, 0, nullptr, nullptr, start.data(), nullptr), 1, "w", ""));
  std::vector<int> species{0, 0}, start2{0, 0, 0};
  EXPECT_NO_THROW(check_graph(
      host_graph<float>(2, 2, species.data(), 0, nullptr, nullptr, start2.data(), nullptr), 1, "w", ""));
}

// The edge index the MACE kernels read, built from a graph (its views reused, the transpose
// built) equals the one built from separate arrays.
TYPED_TEST(GraphBuilderTest, EdgeIndexFromTheGraphEqualsTheOneFromArrays) {
  using T = TypeParam;
  const System s = make_system(13, 17);
  GraphBuilder<Exec, T> builder;
  const AtomGraph<T> g = build(builder, s);
  std::vector<int> snd(g.num_edges()), rcv(g.num_edges());
  for (int e = 0; e < g.num_edges(); ++e) {
    snd[e] = g.neighbor(e);
    rcv[e] = g.center(e);
  }
  const auto a = kernels::EdgeIndex<Exec>::from_graph(g);
  const auto b = kernels::EdgeIndex<Exec>::build(g.n_total, snd, rcv);
  ASSERT_EQ(a.num_nodes, b.num_nodes);
  ASSERT_EQ(a.num_edges, b.num_edges);
  // Only the graph's local nodes receive (the TP's output has their rows only); from arrays,
  // any node may.
  EXPECT_EQ(a.num_receivers, g.n_local);
  EXPECT_EQ(b.num_receivers, g.n_total);
  EXPECT_EQ(a.sender.data(), g.neighbor.data());  // no copy
  EXPECT_EQ(a.receiver.data(), g.center.data());
  for (int n = 0; n <= a.num_nodes; ++n) {
    EXPECT_EQ(a.receiver_ptr(n), b.receiver_ptr(n)) << n;
    EXPECT_EQ(a.sender_ptr(n), b.sender_ptr(n)) << n;
  }
  for (int e = 0; e < a.num_edges; ++e) {
    EXPECT_EQ(a.sender_edges(e), b.sender_edges(e)) << e;
  }
  // Both are the transpose a serial stable loop gives: each sender's edges, ascending.
  std::vector<int> naive_ptr{0}, naive_edges;
  for (int n = 0; n < g.n_total; ++n) {
    for (int e = 0; e < g.num_edges(); ++e) {
      if (snd[e] == n) {
        naive_edges.push_back(e);
      }
    }
    naive_ptr.push_back(static_cast<int>(naive_edges.size()));
  }
  for (int n = 0; n <= a.num_nodes; ++n) {
    EXPECT_EQ(a.sender_ptr(n), naive_ptr[n]) << n;
    EXPECT_EQ(a.receiver_ptr(n), n <= g.n_local ? g.center_start(n) : g.num_edges()) << n;
  }
  for (int e = 0; e < a.num_edges; ++e) {
    EXPECT_EQ(a.sender_edges(e), naive_edges[e]) << e;
  }
}

// On a device the fill stage's atomics place a sender's edges in any order; the sort stage
// puts them back in ascending order. Here the ranges are scrambled by hand, as a device might
// leave them (the host backend fills them in order).
TEST(EdgeTranspose, SortStageOrdersScrambledRanges) {
  using F = kernels::impl::EdgeTransposeFunctor<Exec>;
  F f;
  f.m_sender_ptr = Kokkos::View<int*, Exec>("ptr", 5);
  f.m_sender_edges = Kokkos::View<int*, Exec>("edges", 11);
  const int ptr[] = {0, 4, 4, 5, 11};  // ranges of 4, 0, 1 and 6 edges
  const int scrambled[] = {9, 2, 7, 0, 5, 10, 1, 8, 3, 6, 4};
  for (int k = 0; k < 5; ++k) {
    f.m_sender_ptr(k) = ptr[k];
  }
  for (int k = 0; k < 11; ++k) {
    f.m_sender_edges(k) = scrambled[k];
  }
  Kokkos::parallel_for("test::sort", Kokkos::RangePolicy<Exec, F::TagSort>(0, 4), f);
  const int expected[] = {0, 2, 7, 9, 5, 1, 3, 4, 6, 8, 10};
  for (int k = 0; k < 11; ++k) {
    EXPECT_EQ(f.m_sender_edges(k), expected[k]) << k;
  }
}

}  // namespace
}  // namespace fastmlip::graph
