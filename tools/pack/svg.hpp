// SPDX-License-Identifier: MIT
#pragma once
// Drawing of batch plans in the manner of the MACE paper's Figure 12: per rank a row of bins,
// each bin a frame as wide as the capacity, filled with one rectangle per graph (width
// proportional to its size, a colour per graph).
#include <cstdint>
#include <string>
#include <vector>

namespace fastmlip::pack {

/// The part of one algorithm's plan that is drawn.
struct PlanDrawing {
  std::string title;  ///< e.g. "fastmlip: padding 0.12%, max/mean 1.0004"
  std::int64_t ranks_drawn = 0;
  std::int64_t steps_drawn = 0;
  std::int64_t ranks_total = 0;
  std::int64_t steps_total = 0;
  /// ranks_drawn x steps_drawn bins, rank-major: bins[r * steps_drawn + t] = the (graph, size)
  /// pairs of the bin rank r runs at step t.
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> bins;
};

/// A complete SVG document with one panel per drawing, stacked vertically.
std::string render_svg(const std::vector<PlanDrawing>& panels, std::int64_t capacity,
                       const std::string& caption);

}  // namespace fastmlip::pack
