// SPDX-License-Identifier: MIT
// ImageExchange (models/image_exchange.hpp): the exchanges a model does itself where every ghost
// is an image of a local node, on Kokkos' default execution space (the GPU in a Kokkos-CUDA
// build, the host in CI), against what LAMMPS' communication does on host rows: forward copies a
// ghost's row from its owner; reverse adds the ghosts' rows into their owners' in ghost order and
// zeroes them. Node rows and CHGNet's slot rows; owners with no, one and several ghosts, odd
// widths, float and double; the sums bit for bit.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "models/image_exchange.hpp"

namespace fastmlip::test {
namespace {

using Space = Kokkos::DefaultExecutionSpace;
using Memory = Space::memory_space;

template <class T>
class ImageExchangeTyped : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ImageExchangeTyped, Precisions);

/// 13 local nodes, 29 ghosts: owner 0 has none, several have many, in no particular order.
struct Layout {
  int n_local = 13, n_total = 42;
  std::vector<int> owner;       // [n_total - n_local]
  std::vector<int> slot_start;  // [n_total + 1]: 0..4 slots a local node, a ghost its owner's
};
Layout layout() {
  Layout l;
  std::mt19937 rng(7);
  for (int g = 0; g < l.n_total - l.n_local; ++g) {
    l.owner.push_back(1 + static_cast<int>(rng() % (l.n_local - 1)));
  }
  l.slot_start.push_back(0);
  std::vector<int> count(l.n_total);
  for (int i = 0; i < l.n_local; ++i) {
    count[i] = static_cast<int>(rng() % 5);
  }
  for (int g = 0; g < l.n_total - l.n_local; ++g) {
    count[l.n_local + g] = count[l.owner[g]];
  }
  for (int i = 0; i < l.n_total; ++i) {
    l.slot_start.push_back(l.slot_start.back() + count[i]);
  }
  return l;
}

template <class T>
std::vector<T> random_rows(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<T> v(n);
  for (auto& x : v) {
    x = static_cast<T>(u(rng));
  }
  return v;
}

/// `rows` [n][width] in Memory, f(view), back on the host.
template <class T, class F>
std::vector<T> on_device(const std::vector<T>& rows, int width, F&& f) {
  const int n = static_cast<int>(rows.size()) / width;
  Kokkos::View<T**, Kokkos::LayoutRight, Memory> d("rows", n, width);
  Kokkos::deep_copy(d,
                    Kokkos::View<const T**, Kokkos::LayoutRight, Kokkos::HostSpace>(rows.data(), n, width));
  f(d);
  std::vector<T> out(rows.size());
  Kokkos::deep_copy(Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace>(out.data(), n, width), d);
  return out;
}

/// LAMMPS' communication on one rank, row by row: `first[r]` is row r's first row and `count[r]`
/// its rows (nodes: r, 1; slots: slot_start).
template <class T>
void reference(std::vector<T>& rows, int width, const Layout& l, bool slots, bool reverse) {
  for (int g = 0; g < l.n_total - l.n_local; ++g) {
    const int ghost = l.n_local + g, owner = l.owner[g];
    const int n = slots ? l.slot_start[ghost + 1] - l.slot_start[ghost] : 1;
    const std::size_t from = slots ? l.slot_start[owner] : owner, to = slots ? l.slot_start[ghost] : ghost;
    for (std::size_t q = 0; q < static_cast<std::size_t>(n) * width; ++q) {
      if (reverse) {
        rows[from * width + q] += rows[to * width + q];
        rows[to * width + q] = T(0);
      } else {
        rows[to * width + q] = rows[from * width + q];
      }
    }
  }
}

TYPED_TEST(ImageExchangeTyped, NodeAndSlotRowsAsLammpsCommunication) {
  using T = TypeParam;
  const Layout l = layout();
  models::ImageExchange<Space> images;
  images.set(l.owner.data(), l.n_local, l.n_total);
  ASSERT_TRUE(images.active());
  Kokkos::View<int*, Memory> slot_start("slot_start", l.slot_start.size());
  Kokkos::deep_copy(slot_start,
                    Kokkos::View<const int*, Kokkos::HostSpace>(l.slot_start.data(), l.slot_start.size()));
  images.set_slots(slot_start, l.slot_start.back(), l.slot_start[l.n_local]);
  ASSERT_TRUE(images.slots_active());
  for (const int width : {1, 5, 33}) {
    for (const bool reverse : {false, true}) {
      const std::string at =
          std::string(reverse ? "reverse" : "forward") + ", width " + std::to_string(width);
      const auto rows = random_rows<T>(static_cast<std::size_t>(l.n_total) * width, width);
      auto want = rows;
      reference(want, width, l, false, reverse);
      const auto got =
          on_device(rows, width, [&](const auto& d) { reverse ? images.reverse(d) : images.forward(d); });
      EXPECT_EQ(got, want) << "node rows, " << at;

      const auto slots = random_rows<T>(static_cast<std::size_t>(l.slot_start.back()) * width, 3 * width);
      auto want_slots = slots;
      reference(want_slots, width, l, true, reverse);
      const auto got_slots = on_device(
          slots, width, [&](const auto& d) { reverse ? images.reverse_slots(d) : images.forward_slots(d); });
      EXPECT_EQ(got_slots, want_slots) << "slot rows, " << at;
    }
  }
}

TEST(ImageExchange, NoOwnersOrNoGhostsIsInactiveAndABadOwnerIsNamed) {
  models::ImageExchange<Space> images;
  images.set(nullptr, 4, 9);
  EXPECT_FALSE(images.active());
  const std::vector<int> owner = {0, 3, 2};
  images.set(owner.data(), 4, 4);
  EXPECT_FALSE(images.active()) << "no ghosts";
  const std::vector<int> bad = {0, 4, 2};
  try {
    images.set(bad.data(), 4, 7);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ghost node 5 has owner 4, not one of the 4 local nodes"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace fastmlip::test
