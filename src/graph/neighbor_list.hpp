// SPDX-License-Identifier: MIT
#pragma once
/// \file Periodic neighbor lists (the edges of an atom graph) and the graph-size counts the
/// batch sampler packs by.
///
/// Conventions (the same as ASE's `neighbor_list` and extended XYZ):
/// - positions are n x 3, Angstrom, row per atom;
/// - the cell is 3 x 3 row-major, rows are the lattice vectors a, b, c;
/// - an edge is directed, centre (receiver) i, neighbor (sender) j, with an integer image shift
///   S = (S_a, S_b, S_c); its vector is r_j + S_a a + S_b b + S_c c - r_i, and it is an edge when
///   that vector is strictly shorter than the cutoff. Shifts refer to the positions as given
///   (not wrapped into the cell), so atoms outside the cell are fine.
/// - An atom is its own neighbor through a periodic image (j == i, S != 0) when the cell is
///   short compared with the cutoff; only j == i with S == 0 is excluded.
/// - Directions with pbc false are open: their shift is always 0. Without a cell every
///   direction must be open.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace fastmlip::graph {

/// Two sites closer than this (Angstrom) are taken to be the same atom written twice (or an
/// atom and its own image in a degenerate cell). Real interatomic distances are above 0.1 A and
/// the doubles of a position carry about 1e-15 relative error, so 1e-8 A separates "the same
/// point up to rounding" from any physical geometry by orders of magnitude on both sides.
inline constexpr double kCoincidentDistance = 1e-8;

/// Options of build_neighbor_list.
struct NeighborListOptions {
  /// Edges are pairs strictly closer than this (Angstrom); must be positive and finite.
  double cutoff = 5.0;
  /// Pairs closer than this raise NumericalError instead of producing a zero-length edge whose
  /// unit vector would be NaN. Raise it to reject unphysically close atoms (e.g. 0.5 A).
  double min_distance = kCoincidentDistance;
  /// Fill NeighborList::vectors (3 doubles per edge). Off saves memory when only the
  /// connectivity is needed.
  bool store_vectors = true;
};

/// Directed edges in CSR form by centre atom. Within a centre, edges are sorted by
/// (neighbor, S_a, S_b, S_c), so the list is the same whatever search produced it.
struct NeighborList {
  std::size_t natoms = 0;
  /// natoms + 1 entries; the edges of centre i are [offsets[i], offsets[i + 1]).
  std::vector<std::int64_t> offsets;
  /// Neighbor (sender) atom j of each edge.
  std::vector<std::int32_t> neighbors;
  /// Integer image shift of each edge, 3 per edge (S_a, S_b, S_c).
  std::vector<std::int32_t> shifts;
  /// r_j + S . cell - r_i, 3 per edge (Angstrom); empty when store_vectors was false.
  std::vector<double> vectors;

  std::size_t num_edges() const noexcept { return neighbors.size(); }
  /// The centre (receiver) atom of each edge, expanded from offsets.
  std::vector<std::int32_t> centers() const;
};

/// Builds the neighbor list with a cell (bin) list: O(N) time and memory for a fixed density
/// and cutoff, for any triclinic cell, including cells shorter than the cutoff (as many
/// periodic images as needed are searched) and mixed open/periodic boundaries.
///
/// \param positions  natoms*3 doubles, Angstrom.
/// \param natoms     number of atoms (positions may be nullptr when 0).
/// \param cell       9 doubles, row-major rows a, b, c; nullptr when there is no cell.
/// \param pbc        periodicity along a, b, c; a periodic direction needs a cell.
/// \throws InputError for a non-positive or non-finite cutoff, a non-finite position, a
///         periodic direction without a cell, or a singular cell.
/// \throws NumericalError when two sites are closer than options.min_distance; the message
///         names both atoms (1-based) and the image shift.
NeighborList build_neighbor_list(const double* positions, std::size_t natoms, const double* cell,
                                 const std::array<bool, 3>& pbc, const NeighborListOptions& options);

/// Convenience overload for the layout of io::Frame (positions n*3, optional cell).
NeighborList build_neighbor_list(const std::vector<double>& positions,
                                 const std::optional<std::array<double, 9>>& cell,
                                 const std::array<bool, 3>& pbc, const NeighborListOptions& options);

/// Edge and angle counts of one structure, the sizes the batch sampler packs by.
struct GraphCounts {
  std::int64_t atoms = 0;
  /// Directed edges strictly within the cutoff (what build_neighbor_list returns).
  std::int64_t edges = 0;
  /// Atoms with at least one of those edges (what mace-torch's avg_num_neighbors divides by).
  std::int64_t connected = 0;
  /// CHGNet's angles: for each centre i with b_i directed edges strictly within the bond
  /// cutoff, the ordered pairs of distinct such bonds, b_i (b_i - 1); summed over atoms.
  std::int64_t angles = 0;
};

/// Counts edges (within `cutoff`) and CHGNet angles (bonds within `bond_cutoff`) without
/// storing any edge: O(N) time, O(N) memory. CHGNet's defaults are cutoff 6 A, bond cutoff 3 A.
/// Throws as build_neighbor_list does (bond_cutoff must be positive and finite too).
GraphCounts count_graph(const double* positions, std::size_t natoms, const double* cell,
                        const std::array<bool, 3>& pbc, double cutoff, double bond_cutoff = 3.0,
                        double min_distance = kCoincidentDistance);

/// Convenience overload for the layout of io::Frame.
GraphCounts count_graph(const std::vector<double>& positions,
                        const std::optional<std::array<double, 9>>& cell, const std::array<bool, 3>& pbc,
                        double cutoff, double bond_cutoff = 3.0, double min_distance = kCoincidentDistance);

/// The edge vector r_j + S . cell - r_i, written once so that the fast search, the naive
/// reference and callers that rebuild vectors from shifts round identically. `cell` may be
/// nullptr when all shifts are zero.
inline void edge_vector(const double* ri, const double* rj, const double* cell, const std::int32_t* shift,
                        double* out) noexcept {
  for (int c = 0; c < 3; ++c) {
    double image = 0.0;
    if (cell != nullptr) {
      image = shift[0] * cell[c] + shift[1] * cell[3 + c] + shift[2] * cell[6 + c];
    }
    out[c] = (rj[c] - ri[c]) + image;
  }
}

}  // namespace fastmlip::graph
