// SPDX-License-Identifier: MIT
// CHGNet's geometry stage (models/chgnet/chgnet_geometry.hpp) on Kokkos' default execution
// space, float and double, on random periodic and open structures with odd atom counts (an
// isolated atom and centres with one short edge included):
// - the short edges, slots and angles against a naive enumeration in chgnet's order, r and theta
//   against the formula;
// - the reverse stage against central finite differences of sum_e g_r r_e + sum_a g_theta theta_a
//   (double; float against double), and, on a host space, bit for bit equal to a sequential loop
//   over the angles (what ChgnetModel ran before the stage existed);
// - slot layouts that do not match the short edges refused, naming the node or edge.
// Built into the model tests (the host) and the device tests (a GPU).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "../common/space_views.hpp"
#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "models/chgnet/chgnet_geometry.hpp"
#include "models/chgnet/chgnet_model.hpp"

namespace fastmlip::models {
namespace {

using Space = Kokkos::DefaultExecutionSpace;
using Mem = Space::memory_space;
constexpr bool kHostSpace = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible;

template <class View>
auto to_host(const View& d) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), d);
  return std::vector<typename View::non_const_value_type>(h.data(), h.data() + h.size());
}

/// A random structure (n atoms, no pair closer than 1 A) and its graph; atom n-1 of an open one
/// is placed far from the rest.
template <class T>
ChgnetStructureGraph<T> random_graph(int n, bool periodic, std::uint64_t seed) {
  test::Uniform u(seed);
  const double box = 5.5;
  std::vector<double> pos;
  while (static_cast<int>(pos.size()) < 3 * n) {
    const std::array<double, 3> p{u(0, box), u(0, box), u(0, box)};
    bool ok = true;
    for (std::size_t j = 0; j < pos.size(); j += 3) {
      const double dx = p[0] - pos[j], dy = p[1] - pos[j + 1], dz = p[2] - pos[j + 2];
      ok = ok && dx * dx + dy * dy + dz * dz > 1.0;
    }
    if (ok) {
      pos.insert(pos.end(), p.begin(), p.end());
    }
  }
  if (!periodic) {
    pos[3 * (n - 1)] += 40;  // no neighbours at all
  }
  const std::array<double, 9> cell{box, 0, 0, 0.4, box, 0, -0.3, 0.2, box};
  return make_structure_graph<T>(pos, std::vector<int>(n, 3), periodic ? cell.data() : nullptr,
                                 {periodic, periodic, periodic}, 4.0, 2.4);
}

/// The graph contract's views of `g` in Mem, and the slots.
template <class T>
struct SpaceGraph {
  explicit SpaceGraph(const ChgnetStructureGraph<T>& g)
      : species(test::vector_in_space<int>(g.species, "species")),
        center(test::vector_in_space<int>(g.center, "center")),
        neighbor(test::vector_in_space<int>(g.neighbor, "neighbor")),
        center_start(test::vector_in_space<int>(g.center_start, "center_start")),
        slot_start(test::vector_in_space<int>(g.slot_start, "slot_start")),
        reverse_slot(test::vector_in_space<int>(g.reverse_slot, "reverse_slot")),
        vectors("vectors", g.center.size()) {
    Kokkos::deep_copy(vectors, Kokkos::View<const T* [3], Kokkos::LayoutRight, Kokkos::HostSpace>(
                                   g.vectors.data(), g.center.size()));
    graph.n_local = graph.n_total = g.n_atoms;
    graph.species = species;
    graph.center = center;
    graph.neighbor = neighbor;
    graph.center_start = center_start;
    graph.vectors = vectors;
  }
  Kokkos::View<int*, Mem> species, center, neighbor, center_start, slot_start, reverse_slot;
  Kokkos::View<T* [3], Kokkos::LayoutRight, Mem> vectors;
  graph::AtomGraph<T, Mem> graph;
};

template <class T>
chgnet::Geometry<Space, T> geometry_of(const SpaceGraph<T>& sg) {
  chgnet::Geometry<Space, T> geo;
  chgnet::compute_chgnet_geometry<Space, T>(sg.graph, sg.slot_start, sg.reverse_slot, "test", geo);
  return geo;
}

template <class T>
std::vector<double> reverse_of(const SpaceGraph<T>& sg, const chgnet::Geometry<Space, T>& geo,
                               const std::vector<double>& g_r, const std::vector<double>& g_theta) {
  Kokkos::View<double* [3], Kokkos::LayoutRight, Mem> out("out", sg.graph.num_edges());
  chgnet::reverse_chgnet_geometry<Space, T>(sg.graph, sg.slot_start, geo,
                                            test::vector_in_space<double>(g_r, "g_r"),
                                            test::vector_in_space<double>(g_theta, "g_theta"), out);
  return to_host(out);
}

double angle(const double* va, const double* vb) {
  const double ra = std::sqrt(va[0] * va[0] + va[1] * va[1] + va[2] * va[2]);
  const double rb = std::sqrt(vb[0] * vb[0] + vb[1] * vb[1] + vb[2] * vb[2]);
  return std::acos((va[0] * vb[0] + va[1] * vb[1] + va[2] * vb[2]) / (ra * rb) * (1 - 1e-6));
}

template <class T>
class ChgnetGeometryTest : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ChgnetGeometryTest, Dtypes);

TYPED_TEST(ChgnetGeometryTest, MatchesANaiveEnumeration) {
  using T = TypeParam;
  const double tol = std::is_same_v<T, float> ? 2e-4 : 1e-11;
  for (const bool periodic : {true, false}) {
    for (const int n : {1, 5, 9}) {
      const auto g = random_graph<T>(n, periodic, 100 + n);
      const SpaceGraph<T> sg(g);
      const auto geo = geometry_of(sg);
      const std::string where = (periodic ? "periodic " : "open ") + std::to_string(n);
      // Short edges in edge order; a local node's slots are its short edges in that order.
      std::vector<int> short_edge, edge_slot(g.center.size(), -1);
      for (std::size_t e = 0; e < g.center.size(); ++e) {
        if (g.reverse_slot[e] >= 0) {
          edge_slot[e] = static_cast<int>(short_edge.size());
          short_edge.push_back(static_cast<int>(e));
        }
      }
      ASSERT_EQ(geo.num_short, static_cast<int>(short_edge.size())) << where;
      EXPECT_EQ(to_host(geo.short_edge), short_edge) << where;
      EXPECT_EQ(to_host(geo.edge_slot), edge_slot) << where;
      std::vector<int> a, b, c, start{0};
      for (int i = 0; i < n; ++i) {
        for (int p = g.slot_start[i]; p < g.slot_start[i + 1]; ++p) {
          for (int q = g.slot_start[i]; q < g.slot_start[i + 1]; ++q) {
            if (p != q) {
              a.push_back(p);
              b.push_back(q);
              c.push_back(i);
            }
          }
        }
        start.push_back(static_cast<int>(a.size()));
      }
      ASSERT_EQ(geo.num_angles, static_cast<int>(a.size())) << where;
      EXPECT_EQ(to_host(geo.angle_start), start) << where;
      EXPECT_EQ(to_host(geo.angle_a), a) << where;
      EXPECT_EQ(to_host(geo.angle_b), b) << where;
      EXPECT_EQ(to_host(geo.angle_c), c) << where;
      std::vector<int> rev;
      for (int e : short_edge) {
        rev.push_back(g.reverse_slot[e]);
      }
      EXPECT_EQ(to_host(geo.short_reverse), rev) << where;
      if (periodic && n == 9) {
        EXPECT_GT(geo.num_angles, 20) << "the test should see angles";
      }

      std::vector<double> v(g.vectors.begin(), g.vectors.end());
      const auto r = to_host(geo.r), r_short = to_host(geo.r_short), theta = to_host(geo.theta);
      for (std::size_t e = 0; e < g.center.size(); ++e) {
        const double* ve = v.data() + 3 * e;
        const double want = std::sqrt(ve[0] * ve[0] + ve[1] * ve[1] + ve[2] * ve[2]);
        EXPECT_NEAR(r[e], want, tol * want) << where << " edge " << e;
        if (edge_slot[e] >= 0) {
          EXPECT_EQ(r_short[edge_slot[e]], r[e]);
        }
      }
      for (std::size_t q = 0; q < a.size(); ++q) {
        const double want = angle(v.data() + 3 * short_edge[a[q]], v.data() + 3 * short_edge[b[q]]);
        EXPECT_NEAR(theta[q], want, tol) << where << " angle " << q;
      }
    }
  }
}

/// L(v) = sum_e g_r r_e + sum_a g_theta theta_a with random weights; the reverse stage's dL/dv.
TYPED_TEST(ChgnetGeometryTest, ReverseIsTheGradient) {
  using T = TypeParam;
  const auto gd = random_graph<double>(7, true, 7);
  const auto gt = random_graph<T>(7, true, 7);
  test::Uniform u(3);
  const SpaceGraph<double> sd(gd);
  const auto geo_d = geometry_of(sd);
  std::vector<double> g_r(gd.center.size()), g_theta(static_cast<std::size_t>(geo_d.num_angles));
  for (auto& x : g_r) {
    x = u(-1, 1);
  }
  for (auto& x : g_theta) {
    x = u(-1, 1);
  }
  const auto grad_d = reverse_of(sd, geo_d, g_r, g_theta);
  if constexpr (std::is_same_v<T, double>) {
    const auto loss = [&](const std::vector<double>& v) {
      auto g = gd;
      g.vectors = v;
      const SpaceGraph<double> s(g);
      const auto geo = geometry_of(s);
      const auto r = to_host(geo.r), th = to_host(geo.theta);
      double l = 0;
      for (std::size_t e = 0; e < r.size(); ++e) {
        l += g_r[e] * r[e];
      }
      for (std::size_t q = 0; q < th.size(); ++q) {
        l += g_theta[q] * th[q];
      }
      return l;
    };
    const double h = 1e-6;
    for (std::size_t k = 0; k < gd.vectors.size(); ++k) {
      auto vp = gd.vectors, vm = gd.vectors;
      vp[k] += h;
      vm[k] -= h;
      const double fd = (loss(vp) - loss(vm)) / (2 * h);
      EXPECT_NEAR(grad_d[k], fd, 1e-6 * std::max(1.0, std::abs(fd))) << "component " << k;
    }
  } else {
    const SpaceGraph<T> st(gt);
    const auto grad_t = reverse_of(st, geometry_of(st), g_r, g_theta);
    double scale = 1;
    for (double x : grad_d) {
      scale = std::max(scale, std::abs(x));
    }
    for (std::size_t k = 0; k < grad_d.size(); ++k) {
      EXPECT_NEAR(grad_t[k], grad_d[k], 2e-3 * scale) << "component " << k;
    }
  }
}

/// One thread per edge gathering its angles adds the same terms in the same order as one loop
/// over the angles scattering into both edges: the same bits on a host space.
TYPED_TEST(ChgnetGeometryTest, ReverseEqualsTheSequentialAngleLoop) {
  using T = TypeParam;
  const auto g = random_graph<T>(9, true, 11);
  const SpaceGraph<T> sg(g);
  const auto geo = geometry_of(sg);
  test::Uniform u(5);
  std::vector<double> g_r(g.center.size()), g_theta(static_cast<std::size_t>(geo.num_angles));
  for (auto& x : g_r) {
    x = u(-1, 1);
  }
  for (auto& x : g_theta) {
    x = u(-1, 1);
  }
  const auto got = reverse_of(sg, geo, g_r, g_theta);
  const auto r = to_host(geo.r);
  const auto short_edge = to_host(geo.short_edge), a = to_host(geo.angle_a), b = to_host(geo.angle_b);
  std::vector<double> want(3 * g.center.size());
  for (std::size_t e = 0; e < g.center.size(); ++e) {
    for (int d = 0; d < 3; ++d) {
      want[3 * e + d] = g_r[e] * g.vectors[3 * e + d] / static_cast<double>(r[e]);
    }
  }
  const double clamp = 1 - 1e-6;
  for (std::size_t q = 0; q < a.size(); ++q) {
    const int ea = short_edge[a[q]], eb = short_edge[b[q]];
    const double ra = r[ea], rb = r[eb];
    double ua[3], ub[3];
    for (int d = 0; d < 3; ++d) {
      ua[d] = g.vectors[3 * ea + d] / ra;
      ub[d] = g.vectors[3 * eb + d] / rb;
    }
    const double cosv = ua[0] * ub[0] + ua[1] * ub[1] + ua[2] * ub[2];
    const double cp = clamp * cosv;
    const double gc = -g_theta[q] * clamp / std::sqrt(std::max(1e-300, 1 - cp * cp));
    for (int d = 0; d < 3; ++d) {
      want[3 * ea + d] += gc * (ub[d] - cosv * ua[d]) / ra;
      want[3 * eb + d] += gc * (ua[d] - cosv * ub[d]) / rb;
    }
  }
  for (std::size_t k = 0; k < want.size(); ++k) {
    if (kHostSpace) {
      EXPECT_EQ(got[k], want[k]) << "component " << k;
    } else {
      EXPECT_NEAR(got[k], want[k], 1e-12 * std::max(1.0, std::abs(want[k]))) << "component " << k;
    }
  }
}

TEST(ChgnetGeometry, SlotLayoutsThatDoNotMatchTheShortEdgesAreNamed) {
  const auto g = random_graph<double>(5, true, 105);
  const auto refused = [&](auto mutate, const std::string& expected) {
    auto bad = g;
    mutate(bad);
    const SpaceGraph<double> sg(bad);
    try {
      geometry_of(sg);
      ADD_FAILURE() << "accepted; expected: " << expected;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("test: ", 0), 0u) << e.what();
    }
  };
  ASSERT_GT(g.slot_start[2], 1) << "the cases below need short edges at nodes 0 and 1";
  refused([](auto& b) { b.slot_start[0] = 1; }, "slot_start[0] must be 0");
  refused([](auto& b) { b.slot_start[2] = b.slot_start[1] - 1; }, "it falls after node 1");
  int e1 = 0;
  while (g.reverse_slot[e1] < 0) {
    ++e1;
  }
  refused([&](auto& b) { b.reverse_slot[e1] = b.slot_start.back(); },
          "edge " + std::to_string(e1) + ": reverse slot");
  refused([&](auto& b) { b.reverse_slot[e1] = -1; },
          "has " + std::to_string(g.slot_start[g.center[e1] + 1] - g.slot_start[g.center[e1]] - 1) +
              " short edges but");
  refused([](auto& b) { b.slot_start.pop_back(); }, "slot_start needs n_total + 1");
}

}  // namespace
}  // namespace fastmlip::models
