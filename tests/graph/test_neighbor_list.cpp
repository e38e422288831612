// SPDX-License-Identifier: MIT
// The cell-list neighbor search against its brute-force twin on random systems (triclinic,
// cells shorter than the cutoff, open directions, no cell, atoms outside the cell), plus
// hand-checkable structures and the error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "graph/neighbor_list.hpp"
#include "core/rng.hpp"
#include "graph/reference/neighbor_list_ref.hpp"

namespace fastmlip::graph {
namespace {

// The project's portable stream: a failing case replays on any machine.
using fastmlip::Rng;

struct Case {
  const char* name;
  std::optional<std::array<double, 9>> cell;
  std::array<bool, 3> pbc;
  double cutoff;
  std::size_t large;  // the "large" size: enough atoms for many bins, few enough for O(N^2)
  double lo, hi;      // fractional range of the random positions (outside [0,1) = unwrapped)
};

// Random positions as fractions of the cell (or of a 12 A box when there is none).
std::vector<double> random_positions(const Case& c, std::size_t n, std::uint64_t seed) {
  Rng rng{seed};
  const std::array<double, 9> h = c.cell ? *c.cell : std::array<double, 9>{12, 0, 0, 0, 12, 0, 0, 0, 12};
  std::vector<double> pos(3 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const double f[3] = {rng.uniform(c.lo, c.hi), rng.uniform(c.lo, c.hi), rng.uniform(c.lo, c.hi)};
    for (int x = 0; x < 3; ++x) {
      pos[3 * i + x] = f[0] * h[x] + f[1] * h[3 + x] + f[2] * h[6 + x];
    }
  }
  return pos;
}

const Case kCases[] = {
    {"cubic", std::array<double, 9>{10, 0, 0, 0, 10, 0, 0, 0, 10}, {true, true, true}, 4.0, 600, 0, 1},
    {"triclinic", std::array<double, 9>{9, 0, 0, 3, 8, 0, -2, 2.5, 7.5}, {true, true, true}, 4.5, 600, 0, 1},
    // Several bins along every direction, so the stencil wraps across the periodic boundary.
    {"triclinic_many_bins",
     std::array<double, 9>{19, 0, 0, 4, 17, 0, -3, 2, 18},
     {true, true, true},
     4.0,
     1000,
     0,
     1},
    // Shorter than the cutoff in every direction: each atom sees many images of every atom,
    // itself included.
    {"small_triclinic",
     std::array<double, 9>{2.1, 0, 0, 0.7, 2.3, 0, 0.4, -0.6, 2.6},
     {true, true, true},
     5.0,
     30,
     0,
     1},
    {"slab", std::array<double, 9>{7, 0, 0, 1.5, 6.5, 0, 0, 0, 20}, {true, true, false}, 4.0, 500, 0, 1},
    {"wire", std::array<double, 9>{15, 0, 0, 0, 3.2, 0, 0, 0.5, 15}, {false, true, false}, 4.0, 400, 0, 1},
    {"no_cell", std::nullopt, {false, false, false}, 4.0, 600, 0, 1},
    {"cell_not_periodic",
     std::array<double, 9>{9, 0, 0, 3, 8, 0, -2, 2.5, 7.5},
     {false, false, false},
     4.0,
     500,
     0,
     1},
    // Positions as an MD code writes them: not wrapped, up to two cells outside.
    {"unwrapped", std::array<double, 9>{8, 0, 0, 2, 7, 0, 1, -1, 9}, {true, true, true}, 4.0, 400, -2, 3},
};

void expect_same(const NeighborList& got, const NeighborList& want, const std::string& what) {
  ASSERT_EQ(got.natoms, want.natoms) << what;
  ASSERT_EQ(got.num_edges(), want.num_edges()) << what;
  EXPECT_EQ(got.offsets, want.offsets) << what;
  EXPECT_EQ(got.neighbors, want.neighbors) << what;
  EXPECT_EQ(got.shifts, want.shifts) << what;
  EXPECT_EQ(got.vectors, want.vectors) << what;  // same formula on the same doubles: bitwise equal
}

TEST(NeighborList, MatchesBruteForceOnRandomSystems) {
  for (const Case& c : kCases) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{13}, c.large}) {
      const auto pos = random_positions(c, n, 1000 + n);
      NeighborListOptions opt;
      opt.cutoff = c.cutoff;
      const double* cell = c.cell ? c.cell->data() : nullptr;
      const NeighborList fast = build_neighbor_list(pos.data(), n, cell, c.pbc, opt);
      const NeighborList ref = reference::build_neighbor_list_ref(pos.data(), n, cell, c.pbc, opt);
      expect_same(fast, ref, std::string(c.name) + " n=" + std::to_string(n));
      if (n == c.large) {
        EXPECT_GT(fast.num_edges(), n) << c.name << ": the large case should have work to do";
      }
    }
  }
}

TEST(NeighborList, EdgesComeInReversePairs) {
  // 3000 atoms is beyond what the brute force checks quickly; symmetry (i, j, S) <-> (j, i, -S)
  // with opposite vectors is a necessary property that holds for every correct list.
  const Case c{"big", std::array<double, 9>{30, 0, 0, 5, 28, 0, -3, 4, 31}, {true, true, true}, 5.0, 3000, 0,
               1};
  const auto pos = random_positions(c, c.large, 99);
  NeighborListOptions opt;
  opt.cutoff = c.cutoff;
  const NeighborList nl = build_neighbor_list(pos.data(), c.large, c.cell->data(), c.pbc, opt);
  const auto centre = nl.centers();
  std::map<std::tuple<int, int, int, int, int>, std::size_t> index;
  for (std::size_t e = 0; e < nl.num_edges(); ++e) {
    index[{centre[e], nl.neighbors[e], nl.shifts[3 * e], nl.shifts[3 * e + 1], nl.shifts[3 * e + 2]}] = e;
  }
  ASSERT_GT(nl.num_edges(), 10u * c.large);
  for (std::size_t e = 0; e < nl.num_edges(); ++e) {
    const auto it = index.find(
        {nl.neighbors[e], centre[e], -nl.shifts[3 * e], -nl.shifts[3 * e + 1], -nl.shifts[3 * e + 2]});
    ASSERT_NE(it, index.end()) << "edge " << e << " has no reverse";
    for (int x = 0; x < 3; ++x) {
      EXPECT_NEAR(nl.vectors[3 * it->second + x], -nl.vectors[3 * e + x], 1e-12);
    }
  }
}

TEST(NeighborList, AtomSeesItsOwnImagesInASmallCell) {
  const std::array<double, 9> cell{2, 0, 0, 0, 2, 0, 0, 0, 2};
  const std::vector<double> pos{0.3, 0.4, 0.5};
  NeighborListOptions opt;
  opt.cutoff = 2.5;  // the six face neighbours at 2 A; the edge diagonals are at 2.83 A
  const NeighborList nl = build_neighbor_list(pos, cell, {true, true, true}, opt);
  ASSERT_EQ(nl.num_edges(), 6u);
  for (std::size_t e = 0; e < 6; ++e) {
    EXPECT_EQ(nl.neighbors[e], 0);
    const int* s = &nl.shifts[3 * e];
    EXPECT_EQ(std::abs(s[0]) + std::abs(s[1]) + std::abs(s[2]), 1);
    const double len =
        std::sqrt(nl.vectors[3 * e] * nl.vectors[3 * e] + nl.vectors[3 * e + 1] * nl.vectors[3 * e + 1] +
                  nl.vectors[3 * e + 2] * nl.vectors[3 * e + 2]);
    EXPECT_DOUBLE_EQ(len, 2.0);
  }
}

// Conventional fcc Cu cell: shells at a/sqrt2 (12), a (6), a sqrt(3/2) (24), a sqrt2 (12).
const double kA = 3.615;
const std::array<double, 9> kFccCell{kA, 0, 0, 0, kA, 0, 0, 0, kA};
const std::vector<double> kFccPos{0, 0, 0, 0, kA / 2, kA / 2, kA / 2, 0, kA / 2, kA / 2, kA / 2, 0};

TEST(NeighborList, FccShellsAndChgnetAngles) {
  NeighborListOptions opt;
  opt.cutoff = 3.0;
  const NeighborList nl = build_neighbor_list(kFccPos, kFccCell, {true, true, true}, opt);
  EXPECT_EQ(nl.num_edges(), 4u * 12u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(nl.offsets[i + 1] - nl.offsets[i], 12);
  }
  // cutoff 5 A holds the first three shells (12 + 6 + 24); each atom has b = 12 bonds within
  // 3 A, hence 12 * 11 ordered pairs of bonds.
  const GraphCounts g = count_graph(kFccPos, kFccCell, {true, true, true}, 5.0, 3.0);
  EXPECT_EQ(g.atoms, 4);
  EXPECT_EQ(g.edges, 4 * 42);
  EXPECT_EQ(g.angles, 4 * 12 * 11);
}

TEST(NeighborList, CountsAgreeWithTheList) {
  const Case& c = kCases[1];
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{13}, std::size_t{300}}) {
    const auto pos = random_positions(c, n, 7 + n);
    const GraphCounts g = count_graph(pos.data(), n, c.cell->data(), c.pbc, 4.5, 2.5);
    NeighborListOptions opt;
    opt.cutoff = 4.5;
    const NeighborList list = build_neighbor_list(pos.data(), n, c.cell->data(), c.pbc, opt);
    EXPECT_EQ(g.edges, static_cast<std::int64_t>(list.num_edges()));
    std::int64_t connected = 0;
    for (std::size_t i = 0; i < n; ++i) {
      connected += list.offsets[i + 1] > list.offsets[i];
    }
    EXPECT_EQ(g.connected, connected) << "n=" << n;
    opt.cutoff = 2.5;
    const NeighborList bonds = reference::build_neighbor_list_ref(pos.data(), n, c.cell->data(), c.pbc, opt);
    std::int64_t angles = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t b = bonds.offsets[i + 1] - bonds.offsets[i];
      angles += b * (b - 1);
    }
    EXPECT_EQ(g.angles, angles) << "n=" << n;
    EXPECT_EQ(g.atoms, static_cast<std::int64_t>(n));
  }
}

TEST(NeighborList, IsolatedAtomHasNoNeighbours) {
  // A water-like cluster and one atom 20 A away, no cell.
  const std::vector<double> pos{0, 0, 0, 0.96, 0, 0, -0.24, 0.93, 0, 20, 20, 20};
  NeighborListOptions opt;
  opt.cutoff = 3.0;
  const NeighborList nl = build_neighbor_list(pos, std::nullopt, {false, false, false}, opt);
  EXPECT_EQ(nl.num_edges(), 6u);
  EXPECT_EQ(nl.offsets[4] - nl.offsets[3], 0);
  const NeighborList one =
      build_neighbor_list(std::vector<double>{1, 2, 3}, std::nullopt, {false, false, false}, opt);
  EXPECT_EQ(one.num_edges(), 0u);
  EXPECT_EQ(one.offsets, (std::vector<std::int64_t>{0, 0}));
}

TEST(NeighborList, ZeroRowForAnOpenDirectionIsAccepted) {
  // ASE writes a zero lattice vector for a vacuum direction; the result must not depend on it.
  const Case c = kCases[4];
  const auto pos = random_positions(c, 200, 5);
  std::array<double, 9> zero_c = *c.cell;
  zero_c[6] = zero_c[7] = zero_c[8] = 0.0;
  NeighborListOptions opt;
  opt.cutoff = c.cutoff;
  expect_same(build_neighbor_list(pos.data(), 200, zero_c.data(), c.pbc, opt),
              reference::build_neighbor_list_ref(pos.data(), 200, c.cell->data(), c.pbc, opt),
              "slab with zero c");
  // A wire: only b is periodic, a and c are both zero.
  std::array<double, 9> wire{0, 0, 0, 0.5, 3.0, 0.2, 0, 0, 0};
  std::array<double, 9> wire_full{20, 0, 0, 0.5, 3.0, 0.2, 0, 0, 20};
  std::vector<double> wpos = random_positions({"w", wire_full, {false, true, false}, 4.0, 0, 0, 1}, 50, 6);
  expect_same(
      build_neighbor_list(wpos.data(), 50, wire.data(), {false, true, false}, opt),
      reference::build_neighbor_list_ref(wpos.data(), 50, wire_full.data(), {false, true, false}, opt),
      "wire");
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(NeighborList, CoincidentAtomsRaiseNumericalErrorNamingBoth) {
  NeighborListOptions opt;
  opt.cutoff = 3.0;
  const std::vector<double> pos{0, 0, 0, 1.5, 0, 0, 3, 0, 0, 1.5, 0, 0};  // atoms 2 and 4 coincide
  EXPECT_THROW(build_neighbor_list(pos, std::nullopt, {false, false, false}, opt), NumericalError);
  std::string m = message_of([&] { build_neighbor_list(pos, std::nullopt, {false, false, false}, opt); });
  EXPECT_NE(m.find("atoms 2 and 4"), std::string::npos) << m;
  EXPECT_THROW(count_graph(pos, std::nullopt, {false, false, false}, 3.0), NumericalError);

  // The same point reached through a periodic image: x = 0 and x = L in a periodic cell.
  const std::array<double, 9> cell{10, 0, 0, 0, 10, 0, 0, 0, 10};
  const std::vector<double> img{0, 1, 1, 10, 1, 1};
  m = message_of([&] { build_neighbor_list(img, cell, {true, true, true}, opt); });
  EXPECT_NE(m.find("atoms 1 and 2"), std::string::npos) << m;
  EXPECT_NE(m.find("image shift"), std::string::npos) << m;
  // Along an open direction it is no longer the same point.
  EXPECT_NO_THROW(build_neighbor_list(img, cell, {false, true, true}, opt));

  // A caller-chosen minimum distance rejects atoms 0.5 A apart, the default does not.
  const std::vector<double> close{0, 0, 0, 0.5, 0, 0};
  EXPECT_EQ(build_neighbor_list(close, std::nullopt, {false, false, false}, opt).num_edges(), 2u);
  opt.min_distance = 0.6;
  m = message_of([&] { build_neighbor_list(close, std::nullopt, {false, false, false}, opt); });
  EXPECT_NE(m.find("atoms 1 and 2"), std::string::npos) << m;
  EXPECT_NE(m.find("minimum distance 0.6"), std::string::npos) << m;
}

TEST(NeighborList, InvalidInputIsAnInputError) {
  const std::vector<double> pos{0, 0, 0, 1, 0, 0};
  const std::array<double, 9> cell{5, 0, 0, 0, 5, 0, 0, 0, 5};
  NeighborListOptions opt;
  for (double bad : {0.0, -1.0, std::nan(""), static_cast<double>(INFINITY)}) {
    opt.cutoff = bad;
    EXPECT_THROW(build_neighbor_list(pos, cell, {true, true, true}, opt), InputError) << bad;
  }
  opt.cutoff = 3.0;
  std::string m = message_of([&] { build_neighbor_list(pos, std::nullopt, {true, false, false}, opt); });
  EXPECT_NE(m.find("needs a cell"), std::string::npos) << m;
  const std::array<double, 9> flat{5, 0, 0, 0, 5, 0, 5, 5, 0};
  m = message_of([&] { build_neighbor_list(pos, flat, {true, true, true}, opt); });
  EXPECT_NE(m.find("singular"), std::string::npos) << m;
  const std::vector<double> nan_pos{0, 0, 0, 1, std::nan(""), 0};
  m = message_of([&] { build_neighbor_list(nan_pos, cell, {true, true, true}, opt); });
  EXPECT_NE(m.find("atom 2"), std::string::npos) << m;
  EXPECT_THROW(build_neighbor_list(std::vector<double>{0, 0}, cell, {true, true, true}, opt), InputError);
  EXPECT_THROW(count_graph(pos, cell, {true, true, true}, 3.0, -1.0), InputError);
}

}  // namespace
}  // namespace fastmlip::graph
