// SPDX-License-Identifier: MIT
#pragma once
/// \file The symmetric contraction's tables as its kernels read them. Plain data without
/// Kokkos: the Kokkos functors (impl/symmetric_contraction_impl.hpp) and the per-ISA row
/// kernels (symmetric_contraction_simd.hpp) share them.

namespace fastmlip::kernels::impl {

/// A monomial: its prefix monomial (-1 for degree 1) times ell `last`.
struct SCMonomialDev {
  int parent, last;
};
/// A non-zero of a folded U.
struct SCEntryDev {
  int out;  ///< column of channel 0's component in an output row; channel c adds c * stride
  int stride;
  int local;  ///< index in a channel's accumulator
  int monomial;
};

}  // namespace fastmlip::kernels::impl
