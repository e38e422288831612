// SPDX-License-Identifier: MIT
#pragma once
/// \file What the training-set statistics (data/statistics.hpp) need of one configuration: its
/// atoms by element, energy, squared forces and neighbour counts. A preprocessed dataset stores
/// one per graph in its index, so that a fresh model's E0s, avg_num_neighbors and scale/shift
/// come without reading a graph; for data in memory they are made from the configurations. The
/// statistics are computed from summaries either way, in graph order, so both give the same bits.
#include <cstdint>
#include <utility>
#include <vector>

#include "data/dataset.hpp"

namespace fastmlip::trainer::data {

struct GraphSummary {
  std::uint32_t atoms = 0;
  std::uint64_t edges = 0;      ///< directed edges within the r_max it was made at
  std::uint32_t connected = 0;  ///< atoms with at least one such edge
  bool has_energy = false;
  double energy = 0.0;    ///< eV, when has_energy
  double force_sq = 0.0;  ///< sum of the squared force components (0 without forces)
  std::vector<std::pair<int, std::uint32_t>> composition;  ///< (Z, atoms of Z), ascending Z
};

/// The summary of `c`; with r_max > 0 also its edges and connected atoms within r_max (Error from
/// the neighbour search for a bad structure), else those are 0.
GraphSummary summarize(const Config& c, double r_max);

}  // namespace fastmlip::trainer::data
