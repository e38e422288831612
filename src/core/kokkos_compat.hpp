// SPDX-License-Identifier: MIT
#pragma once
/// \file The one place that absorbs differences between Kokkos 3.4 (Debian bookworm) and
/// Kokkos 4.x (what current LAMMPS bundles). Kernels use these names only.
#include <Kokkos_Core.hpp>

namespace fastmlip::kmath {
#if KOKKOS_VERSION >= 40000
using Kokkos::cos;
using Kokkos::exp;
using Kokkos::pow;
using Kokkos::sin;
using Kokkos::sqrt;
#else
// Kokkos 3.x keeps its device-callable math functions in Experimental.
using Kokkos::Experimental::cos;
using Kokkos::Experimental::exp;
using Kokkos::Experimental::pow;
using Kokkos::Experimental::sin;
using Kokkos::Experimental::sqrt;
#endif
}  // namespace fastmlip::kmath
