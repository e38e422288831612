// SPDX-License-Identifier: MIT
#pragma once
// Test stand-in for LAMMPS' KOKKOS/kokkos_base.h as of 29 Sep 2021 (not LAMMPS' file): the pair
// hooks' parameter lists only, for test_kokkos_pair_comm.cpp. A swap's send list is a row of one
// table of every swap's lists; there are no reverse hooks; the buffer type is tdual_xfloat_1d.
#include <Kokkos_DualView.hpp>

#define FASTMLIP_TEST_KOKKOS_BASE_2021 1

namespace LAMMPS_NS {
namespace DAT {
using tdual_int_2d = Kokkos::DualView<int**, Kokkos::LayoutLeft, Kokkos::DefaultHostExecutionSpace>;
using tdual_xfloat_1d = Kokkos::DualView<double*, Kokkos::DefaultHostExecutionSpace>;
}  // namespace DAT

class KokkosBase {
 public:
  virtual int pack_forward_comm_kokkos(int, DAT::tdual_int_2d, int, DAT::tdual_xfloat_1d&, int, int*) {
    return 0;
  }
  virtual void unpack_forward_comm_kokkos(int, int, DAT::tdual_xfloat_1d&) {}
};
}  // namespace LAMMPS_NS
