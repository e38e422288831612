// SPDX-License-Identifier: MIT
// ChgnetSlotBuilder (models/chgnet/chgnet_slots.hpp), the slot layout a LAMMPS rank's CHGNet graph
// needs, built from positions and atom IDs where the graph lives: on the host, and on Kokkos'
// default execution space where that is a device (the GPU in the kokkos-cuda preset). Checked
// against the layout chgnet_test_util.hpp's ghost_graph derives from make_structure_graph's
// folded graph (each periodic image a ghost node with its owner's slots), on cells where one
// atom's images are in reach of each other, and for a ghost whose owner does not hold the bond
// back: the error names the first such edge.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "chgnet_fixtures.hpp"
#include "chgnet_test_util.hpp"
#include "graph/graph_mirror.hpp"
#include "io/potential_file.hpp"
#include "models/chgnet/chgnet_slots.hpp"

namespace fastmlip::test {
namespace {

using namespace chgnet_fixtures;

/// A rank's exchange on one process: ghost rows are copies of their owners' (forward only, as
/// the builder asks), ghost slot rows follow the layout the builder reports. `forget` (a ghost
/// node, or -1): that ghost's slot records arrive with another atom's ID, as if its owner held
/// other bonds.
class CopySlotExchange : public models::ChgnetSlotExchange {
 public:
  CopySlotExchange(int n_local, std::vector<int> owner, int forget = -1, bool offer_owners = false)
      : m_n_local(n_local), m_owner(std::move(owner)), m_forget(forget), m_offer(offer_owners) {}

  /// With `offer_owners`, as a pair style on one rank: the builder then copies the rows itself.
  const int* ghost_owners() override { return m_offer ? m_owner.data() : nullptr; }
  void forward(double* rows, int width) override {
    ++calls;
    for (std::size_t g = 0; g < m_owner.size(); ++g) {
      for (int k = 0; k < width; ++k) {
        rows[(m_n_local + g) * width + k] = rows[m_owner[g] * width + k];
      }
    }
  }
  void reverse(double*, int) override { FAIL() << "the slot builder only copies forward"; }
  void slot_layout(const int* slot_start, const int*, int n_total, int local_max) override {
    layout.assign(slot_start, slot_start + n_total + 1);
    most = local_max;
  }
  void forward_slots(double* rows, int width) override {
    ++calls;
    ASSERT_FALSE(layout.empty()) << "forward_slots before slot_layout";
    for (std::size_t g = 0; g < m_owner.size(); ++g) {
      const int ghost = m_n_local + static_cast<int>(g), owner = m_owner[g];
      ASSERT_EQ(layout[ghost + 1] - layout[ghost], layout[owner + 1] - layout[owner]);
      for (int s = 0; s < layout[ghost + 1] - layout[ghost]; ++s) {
        for (int k = 0; k < width; ++k) {
          rows[(layout[ghost] + s) * width + k] = rows[(layout[owner] + s) * width + k];
        }
        if (ghost == m_forget) {
          rows[(layout[ghost] + s) * width] = -1;  // the far atom's ID
        }
      }
    }
  }
  void reverse_slots(double*, int) override { FAIL() << "the slot builder only copies forward"; }

  std::vector<int> layout;
  int most = -1;
  int calls = 0;  // forward and forward_slots

 private:
  int m_n_local;
  std::vector<int> m_owner;
  int m_forget;
  bool m_offer;
};

/// Copies ghost rows from their owners' where the rows are, on Space: node rows (TagNodes, one
/// thread per ghost) or slot rows through the layout in Space's memory (TagSlots).
template <class Space>
struct CopyGhostRows {
  struct TagNodes {};
  struct TagSlots {};
  using Memory = typename Space::memory_space;
  Kokkos::View<double**, Kokkos::LayoutRight, Memory, Kokkos::MemoryTraits<Kokkos::Unmanaged>> rows;
  Kokkos::View<const int*, Memory> owner;  // [n_ghost]
  Kokkos::View<const int*, Memory, Kokkos::MemoryTraits<Kokkos::Unmanaged>> start;
  int n_local = 0;

  KOKKOS_INLINE_FUNCTION void operator()(TagNodes, int g) const {
    for (int k = 0; k < static_cast<int>(rows.extent(1)); ++k) {
      rows(n_local + g, k) = rows(owner(g), k);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(TagSlots, int g) const {
    const int ghost = n_local + g, from = start(owner(g));
    for (int s = start(ghost); s < start(ghost + 1); ++s) {
      for (int k = 0; k < static_cast<int>(rows.extent(1)); ++k) {
        rows(s, k) = rows(from + s - start(ghost), k);
      }
    }
  }
};

/// CopySlotExchange's copies where the rows are, as a /kk pair style takes them
/// (rows_in_model_memory): the builder must hand it rows in Space's memory, and the slot layout
/// there, which its slot copy reads.
template <class Space>
class ModelMemorySlotExchange : public models::ChgnetSlotExchange {
 public:
  using Memory = typename Space::memory_space;
  ModelMemorySlotExchange(int n_local, const std::vector<int>& owner) : m_n_local(n_local) {
    m_owner = Kokkos::View<int*, Memory>("owner", owner.size());
    Kokkos::deep_copy(m_owner, Kokkos::View<const int*, Kokkos::HostSpace>(owner.data(), owner.size()));
  }
  bool rows_in_model_memory() const override { return true; }
  void forward(double* rows, int width) override {
    ++calls;
    copy<typename Copy::TagNodes>(rows, m_n_local + static_cast<int>(m_owner.extent(0)), width);
  }
  void reverse(double*, int) override { FAIL() << "the slot builder only copies forward"; }
  void slot_layout(const int* slot_start, const int* model_slot_start, int n_total, int) override {
    layout.assign(slot_start, slot_start + n_total + 1);
    m_start = Kokkos::View<const int*, Memory, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(model_slot_start,
                                                                                        n_total + 1);
    model_layout.resize(n_total + 1);
    Kokkos::deep_copy(Kokkos::View<int*, Kokkos::HostSpace>(model_layout.data(), model_layout.size()),
                      m_start);
  }
  void forward_slots(double* rows, int width) override {
    ++calls;
    ASSERT_FALSE(layout.empty()) << "forward_slots before slot_layout";
    copy<typename Copy::TagSlots>(rows, layout.back(), width);
  }
  void reverse_slots(double*, int) override { FAIL() << "the slot builder only copies forward"; }

  std::vector<int> layout, model_layout;
  int calls = 0;

 private:
  using Copy = CopyGhostRows<Space>;
  template <class Tag>
  void copy(double* rows, int n_rows, int width) {
    Copy f;
    f.rows = decltype(f.rows)(rows, n_rows, width);
    f.owner = m_owner;
    f.start = m_start;
    f.n_local = m_n_local;
    Kokkos::parallel_for("fastmlip::test::copy_ghost_rows",
                         Kokkos::RangePolicy<Space, Tag>(0, static_cast<int>(m_owner.extent(0))), f);
    Space().fence();
  }
  int m_n_local;
  Kokkos::View<int*, Memory> m_owner;
  Kokkos::View<const int*, Memory, Kokkos::MemoryTraits<Kokkos::Unmanaged>> m_start;
};

/// The ghost graph's positions (an image's: its owner's plus the shift, from an edge reaching it)
/// and IDs (its owner's).
struct Atoms {
  std::vector<double> x;
  std::vector<long> tag;
};
Atoms atoms_of(const ChgnetStructure& s, const ChgnetGhostGraph<double>& g) {
  Atoms a;
  a.x.assign(3 * static_cast<std::size_t>(g.n_total), 0.0);
  a.tag.resize(g.n_total);
  for (int i = 0; i < g.n_local; ++i) {
    for (int c = 0; c < 3; ++c) {
      a.x[3 * i + c] = s.positions[3 * i + c];
    }
    a.tag[i] = 101 + i;  // IDs are not indices
  }
  for (int k = 0; k < g.n_total - g.n_local; ++k) {
    a.tag[g.n_local + k] = a.tag[g.owner[k]];
  }
  const auto& e = g.arrays;
  for (std::size_t edge = 0; edge < e.center.size(); ++edge) {
    const int i = e.center[edge], j = e.neighbor[edge];
    if (j >= g.n_local) {
      for (int c = 0; c < 3; ++c) {
        a.x[3 * j + c] = a.x[3 * i + c] + e.vectors[3 * edge + c];
      }
    }
  }
  return a;
}

template <class Space>
struct Built {
  std::vector<int> slot_start, reverse_slot;
};

/// The builder on Space, its inputs mirrored into Space's memory.
template <class Space>
Built<Space> build_on(const ChgnetGhostGraph<double>& g, const Atoms& a, double bond_cutoff,
                      models::ChgnetSlotExchange& exchange) {
  using Memory = typename Space::memory_space;
  graph::GraphMirror<double, Memory> mirror;
  const auto graph = mirror.of(g.view());
  Kokkos::View<double* [3], Kokkos::LayoutRight, Memory> x("x", g.n_total);
  Kokkos::View<long*, Memory> tag("tag", g.n_total);
  Kokkos::deep_copy(
      x, Kokkos::View<const double* [3], Kokkos::LayoutRight, Kokkos::HostSpace>(a.x.data(), g.n_total));
  Kokkos::deep_copy(tag, Kokkos::View<const long*, Kokkos::HostSpace>(a.tag.data(), g.n_total));
  models::ChgnetSlotBuilder<Space> builder;
  const auto slots = builder.build(graph, Kokkos::View<const double* [3], Kokkos::LayoutRight, Memory>(x),
                                   Kokkos::View<const long*, Memory>(tag), bond_cutoff, &exchange);
  Built<Space> out;
  out.slot_start.resize(slots.slot_start.extent(0));
  out.reverse_slot.resize(slots.reverse_slot.extent(0));
  Kokkos::deep_copy(Kokkos::View<int*, Kokkos::HostSpace>(out.slot_start.data(), out.slot_start.size()),
                    slots.slot_start);
  Kokkos::deep_copy(Kokkos::View<int*, Kokkos::HostSpace>(out.reverse_slot.data(), out.reverse_slot.size()),
                    slots.reverse_slot);
  return out;
}

template <class Space>
void check_layouts() {
  for (const std::string name : {"small_cell", "licoo2_triclinic_v020", "limno2_rattled"}) {
    const json j = read_json(fixture_dir() + "/" + name + ".json");
    const auto file = io::read_potential_file(potential_path(version_of(j)));
    const models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> model(file);
    const auto s = structure_of(j);
    const auto g = ghost_graph<double>(s, model.cutoff(), model.bond_cutoff());
    ASSERT_GT(g.n_total, g.n_local) << name << ": the test needs ghost nodes";
    const Atoms a = atoms_of(s, g);
    for (const bool owners : {false, true}) {
      CopySlotExchange exchange(g.n_local, g.owner, -1, owners);
      const auto got = build_on<Space>(g, a, model.bond_cutoff(), exchange);
      const std::string at = name + " on " + Space::name() + (owners ? ", owners named" : "");
      EXPECT_EQ(exchange.calls, owners ? 0 : 2) << at;
      EXPECT_EQ(got.slot_start, g.arrays.slot_start) << at;
      EXPECT_EQ(got.reverse_slot, g.arrays.reverse_slot) << at;
      EXPECT_EQ(exchange.layout, g.arrays.slot_start) << at << ": the layout the exchange was told";
      int most = 0;
      for (int i = 0; i < g.n_local; ++i) {
        most = std::max(most, g.arrays.slot_start[i + 1] - g.arrays.slot_start[i]);
      }
      EXPECT_EQ(exchange.most, most) << at;
      int short_edges = 0;
      for (const int r : got.reverse_slot) {
        short_edges += r >= 0 ? 1 : 0;
      }
      EXPECT_GT(short_edges, 0) << at << ": the test needs short edges";
    }
    // As a /kk pair style takes them: the same layout. On a device this exchange's kernels could
    // not read rows (or a layout) staged on the host.
    ModelMemorySlotExchange<Space> in_place(g.n_local, g.owner);
    const auto got = build_on<Space>(g, a, model.bond_cutoff(), in_place);
    const std::string at = name + " on " + Space::name() + ", exchanged in the model's memory";
    EXPECT_EQ(in_place.calls, 2) << at;
    EXPECT_EQ(got.slot_start, g.arrays.slot_start) << at;
    EXPECT_EQ(got.reverse_slot, g.arrays.reverse_slot) << at;
    EXPECT_EQ(in_place.model_layout, g.arrays.slot_start) << at << ": the layout in the model's memory";
  }
}

TEST(ChgnetSlots, TheLayoutOfARankWithGhostsOnTheHost) { check_layouts<Kokkos::DefaultHostExecutionSpace>(); }

TEST(ChgnetSlots, TheLayoutOfARankWithGhostsOnTheDevice) {
  if (std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::DefaultHostExecutionSpace>) {
    GTEST_SKIP() << "Kokkos has no device backend here (default execution space "
                 << Kokkos::DefaultExecutionSpace::name() << ")";
  }
  check_layouts<Kokkos::DefaultExecutionSpace>();
}

TEST(ChgnetSlots, ABondItsGhostsOwnerDoesNotHoldIsNamed) {
  const json j = read_json(fixture_dir() + "/limno2_rattled.json");
  const auto file = io::read_potential_file(potential_path(version_of(j)));
  const models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, double> model(file);
  const auto s = structure_of(j);
  const auto g = ghost_graph<double>(s, model.cutoff(), model.bond_cutoff());
  // The first short edge to a ghost, and that ghost's first short edge from any centre.
  int ghost = -1, first = -1;
  for (std::size_t e = 0; e < g.arrays.center.size() && first < 0; ++e) {
    if (g.arrays.neighbor[e] >= g.n_local && g.arrays.reverse_slot[e] >= 0) {
      ghost = g.arrays.neighbor[e];
      first = static_cast<int>(e);
    }
  }
  ASSERT_GE(first, 0) << "the test needs a short edge to a ghost";
  CopySlotExchange exchange(g.n_local, g.owner, ghost);
  try {
    build_on<Kokkos::DefaultExecutionSpace>(g, atoms_of(s, g), model.bond_cutoff(), exchange);
    FAIL() << "no error";
  } catch (const models::UnpairedBondError& e) {
    EXPECT_EQ(e.edge, first);
    EXPECT_EQ(e.center, g.arrays.center[first]);
    EXPECT_EQ(e.neighbor, ghost);
    const double* v = &g.arrays.vectors[3 * first];
    EXPECT_NEAR(e.length, std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]), 1e-12);
    EXPECT_NE(std::string(e.what()).find("has no reverse among node " + std::to_string(ghost) + "'s slots"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace fastmlip::test
