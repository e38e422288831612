// SPDX-License-Identifier: MIT
#pragma once
/// \file The naive twin of graph/neighbor_list.hpp: every pair of atoms, every periodic image
/// in a box wide enough to hold the cutoff sphere. O(N^2 x images); for tests only.
///
/// It shares nothing with the cell-list search but graph::edge_vector (the one formula for an
/// edge vector, so that both decide "within the cutoff" on the same doubles). Plane spacings
/// come from cross products here rather than from the inverse cell matrix used there.
#include <array>
#include <cstddef>

#include "graph/neighbor_list.hpp"

namespace fastmlip::graph::reference {

/// Same contract and edge order as graph::build_neighbor_list, except: a cell with any
/// periodic direction must be non-singular (no zero rows for open directions), and there is
/// no min_distance check (pairs closer than options.min_distance are returned as edges).
NeighborList build_neighbor_list_ref(const double* positions, std::size_t natoms, const double* cell,
                                     const std::array<bool, 3>& pbc, const NeighborListOptions& options);

}  // namespace fastmlip::graph::reference
