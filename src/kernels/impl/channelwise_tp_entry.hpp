// SPDX-License-Identifier: MIT
#pragma once
/// \file A CG non-zero of the channelwise TP as its kernels read it. Plain data without Kokkos:
/// the Kokkos functors (impl/channelwise_tp_impl.hpp) and the per-ISA row kernels
/// (channelwise_tp_simd.hpp) share it.

namespace fastmlip::kernels::impl {

/// C_ijk of one instruction: i indexes the instruction's input component (2 l1 + 1), j the
/// edge attribute's (2 l2 + 1), k the output's (2 l3 + 1).
template <class T>
struct TPEntryDev {
  int i, j, k;
  T value;
};

}  // namespace fastmlip::kernels::impl
