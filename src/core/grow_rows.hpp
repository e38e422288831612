// SPDX-License-Identifier: MIT
#pragma once
/// \file Grow-only Kokkos views: the per-step arrays of the graph, of its copies and of the
/// kernels and models (kernels/impl/grow_buffer.hpp) are allocated once and reused while the
/// system does not grow.
#include <Kokkos_Core.hpp>
#include <cstddef>
#include <string>

namespace fastmlip {

/// Makes `view` hold at least `n` rows (its first extent), reallocating with headroom when it is
/// shorter: edge counts fluctuate from step to step, so an MD run reallocates rarely. Contents
/// are not kept.
template <class View>
void grow_rows(View& view, std::size_t n, const std::string& label) {
  if (view.extent(0) < n) {
    view = View(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), n + n / 5 + 16);
  }
}

}  // namespace fastmlip
