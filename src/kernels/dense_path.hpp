// SPDX-License-Identifier: MIT
#pragma once
/// \file Which implementation runs the dense kernels' Kokkos entry points (dense_kokkos.hpp,
/// gated_mlp_kokkos.hpp) and the CHGNet stages built on them: `rows`, the host's SIMD kernels,
/// on host spaces; `teams`, Kokkos functors, on devices, and on the host where a test asks for
/// it (the CPU check of what a GPU runs).

namespace fastmlip::kernels {

/// automatic: rows on host spaces, teams elsewhere.
enum class DensePath { automatic, rows, teams };

}  // namespace fastmlip::kernels
