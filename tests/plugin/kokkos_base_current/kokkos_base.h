// SPDX-License-Identifier: MIT
#pragma once
// Test stand-in for LAMMPS' KOKKOS/kokkos_base.h of releases after 29 Sep 2021 (not LAMMPS'
// file): the pair hooks' parameter lists only, for test_kokkos_pair_comm.cpp. A swap's send list
// is its own 1-D list, reverse hooks exist, and the buffer carries its later name,
// tdual_double_1d.
#include <Kokkos_DualView.hpp>

namespace LAMMPS_NS {
namespace DAT {
using tdual_int_1d = Kokkos::DualView<int*, Kokkos::DefaultHostExecutionSpace>;
using tdual_double_1d = Kokkos::DualView<double*, Kokkos::DefaultHostExecutionSpace>;
}  // namespace DAT

class KokkosBase {
 public:
  virtual int pack_forward_comm_kokkos(int, DAT::tdual_int_1d, DAT::tdual_double_1d&, int, int*) { return 0; }
  virtual void unpack_forward_comm_kokkos(int, int, DAT::tdual_double_1d&) {}
  virtual int pack_reverse_comm_kokkos(int, int, DAT::tdual_double_1d&) { return 0; }
  virtual void unpack_reverse_comm_kokkos(int, DAT::tdual_int_1d, DAT::tdual_double_1d&) {}

 protected:
  ~KokkosBase() = default;
};
}  // namespace LAMMPS_NS
