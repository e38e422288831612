// SPDX-License-Identifier: MIT
#pragma once
/// \file The one place that absorbs differences between Kokkos 3.4 (Debian bookworm) and
/// Kokkos 4.x (what current LAMMPS bundles). Kernels use these names only.
#include <Kokkos_Core.hpp>

#include "math/dual.hpp"

namespace fastmlip::kmath {
#if KOKKOS_VERSION >= 40000
using Kokkos::acos;
using Kokkos::cos;
using Kokkos::exp;
using Kokkos::fmax;
using Kokkos::pow;
using Kokkos::sin;
using Kokkos::sqrt;
using Kokkos::tanh;
#else
// Kokkos 3.x keeps its device-callable math functions in Experimental.
using Kokkos::Experimental::acos;
using Kokkos::Experimental::cos;
using Kokkos::Experimental::exp;
using Kokkos::Experimental::fmax;
using Kokkos::Experimental::pow;
using Kokkos::Experimental::sin;
using Kokkos::Experimental::sqrt;
using Kokkos::Experimental::tanh;
#endif
// Dual numbers (math/dual.hpp), for the forward-over-reverse double backward.
using fastmlip::cos;
using fastmlip::exp;
using fastmlip::pow;
using fastmlip::sin;
using fastmlip::sqrt;
}  // namespace fastmlip::kmath

// Kokkos' Sum reducer starts from reduction_identity<T>::sum(): zero value, zero tangent.
namespace Kokkos {
template <class T>
struct reduction_identity<fastmlip::Dual<T>> {
  KOKKOS_FORCEINLINE_FUNCTION static fastmlip::Dual<T> sum() { return fastmlip::Dual<T>(); }
  KOKKOS_FORCEINLINE_FUNCTION static fastmlip::Dual<T> prod() { return fastmlip::Dual<T>(T(1), T(0)); }
};
}  // namespace Kokkos
