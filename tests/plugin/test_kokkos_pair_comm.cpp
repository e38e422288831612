// SPDX-License-Identifier: MIT
// lammps-plugin/kokkos_pair_comm.h against both shapes of LAMMPS' KOKKOS pair hooks, from the
// stand-in headers in kokkos_base_2021/ and kokkos_base_current/ (this file is compiled once against
// each): a call through KokkosBase, as CommKokkos makes it, reaches the owner's work with the
// swap's send list and the buffer's data, and the reverse hooks exist exactly where the headers
// declare them. CI's LAMMPS (29 Sep 2021) runs the real hooks in test_pair_kokkos.cpp; no LAMMPS
// after 29 Sep 2021 with its KOKKOS headers is at hand here, so this is what checks that the
// overrides follow that declaration too.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <vector>

#include "kokkos_pair_comm.h"

namespace {

using Device = Kokkos::DefaultHostExecutionSpace;
namespace DAT = LAMMPS_NS::DAT;

/// What the hooks handed over, last call of each kind.
class Owner : public fastmlip::plugin::KokkosPairComm<Owner> {
 public:
  using device_type = Device;
  using SendList = fastmlip::plugin::kokkos_comm_detail::SendList<Device>;

  int pack_rows(int n, const SendList& list, double* buf) {
    record("pack_rows", n, -1, &list, buf);
    return 3 * n;
  }
  void unpack_rows(int n, int first, const double* buf) { record("unpack_rows", n, first, nullptr, buf); }
  int pack_ghost_rows(int n, int first, double* buf) {
    record("pack_ghost_rows", n, first, nullptr, buf);
    return 5 * n;
  }
  void add_rows(int n, const SendList& list, const double* buf) { record("add_rows", n, -1, &list, buf); }

  std::string call;
  int n = 0, first = 0;
  std::vector<int> list;
  const double* buf = nullptr;

 private:
  void record(const char* what, int n_, int first_, const SendList* list_, const double* buf_) {
    call = what;
    n = n_;
    first = first_;
    buf = buf_;
    list.clear();
    if (list_ != nullptr) {
      const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), *list_);
      for (int i = 0; i < n_; ++i) {
        list.push_back(h(i));
      }
    }
  }
};

TEST(KokkosPairComm, CallsThroughKokkosBaseReachTheOwner) {
  Owner owner;
  LAMMPS_NS::KokkosBase& base = owner;
#ifdef FASTMLIP_TEST_KOKKOS_BASE_2021
  DAT::tdual_xfloat_1d buf("buf", 16);
  // Every swap's list in one table (LayoutLeft, so a swap's row is strided): swap 1 is used.
  DAT::tdual_int_2d lists("lists", 3, 4);
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < 4; ++i) {
      lists.h_view(s, i) = 100 * s + i;
    }
  }
  EXPECT_EQ(base.pack_forward_comm_kokkos(4, lists, 1, buf, 0, nullptr), 12);
  EXPECT_EQ(owner.list, (std::vector<int>{100, 101, 102, 103}));
  static_assert(!fastmlip::plugin::kDeviceReverse, "29 Sep 2021 has no reverse pair hooks");
#else
  DAT::tdual_double_1d buf("buf", 16);
  DAT::tdual_int_1d list("list", 4);
  for (int i = 0; i < 4; ++i) {
    list.h_view(i) = 7 + 2 * i;
  }
  EXPECT_EQ(base.pack_forward_comm_kokkos(4, list, buf, 1, nullptr), 12);
  EXPECT_EQ(owner.list, (std::vector<int>{7, 9, 11, 13}));
  static_assert(fastmlip::plugin::kDeviceReverse, "these headers declare the reverse hooks");
  EXPECT_EQ(base.pack_reverse_comm_kokkos(3, 40, buf), 15);
  EXPECT_EQ(owner.call, "pack_ghost_rows");
  EXPECT_EQ(owner.n, 3);
  EXPECT_EQ(owner.first, 40);
  EXPECT_EQ(owner.buf, buf.view_host().data());
  base.unpack_reverse_comm_kokkos(2, list, buf);
  EXPECT_EQ(owner.call, "add_rows");
  EXPECT_EQ(owner.list, (std::vector<int>{7, 9}));
  EXPECT_EQ(owner.buf, buf.view_host().data());
  base.pack_forward_comm_kokkos(4, list, buf, 1, nullptr);
#endif
  EXPECT_EQ(owner.call, "pack_rows");
  EXPECT_EQ(owner.buf, buf.view_host().data());
  base.unpack_forward_comm_kokkos(2, 31, buf);
  EXPECT_EQ(owner.call, "unpack_rows");
  EXPECT_EQ(owner.n, 2);
  EXPECT_EQ(owner.first, 31);
  EXPECT_EQ(owner.buf, buf.view_host().data());
}

}  // namespace
