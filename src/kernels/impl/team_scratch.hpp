// SPDX-License-Identifier: MIT
#pragma once
/// \file Where a team's scratch goes. The tiled kernels stage a tile of rows in team scratch;
/// on a GPU level 0 is the SM's shared memory, whose per-team limit (Policy::scratch_size_max(0),
/// 48 KiB by default on CUDA) a wide layer's tile can pass (the radial MLP's reverse tile at
/// MACE-MP widths is 98 KiB in double). Such tiles go to level 1 (device memory) instead:
/// slower, but the launch stays valid. On the host both levels are ordinary memory.
#include <Kokkos_Core.hpp>
#include <cstddef>

namespace fastmlip::kernels::impl {

/// Sets `policy`'s per-team scratch to `bytes` at the first level that holds it and returns that
/// level, for the functor to pass to team.team_scratch().
template <class Policy>
int set_team_scratch(Policy& policy, std::size_t bytes) {
  const int level = bytes <= static_cast<std::size_t>(Policy::scratch_size_max(0)) ? 0 : 1;
  policy.set_scratch_size(level, Kokkos::PerTeam(bytes));
  return level;
}

}  // namespace fastmlip::kernels::impl
