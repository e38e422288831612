// SPDX-License-Identifier: MIT
#include "svg.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "io/svg_text.hpp"

namespace fastmlip::pack {
namespace {

using io::svg_number;
using io::xml_escape;

// Neighbouring graph indices get distant hues (golden-angle steps), so adjacent rectangles of
// a bin stay distinguishable without a legend.
std::string colour(std::int64_t graph) {
  const double hue =
      static_cast<double>((static_cast<std::uint64_t>(graph) * 137508ull) % 360000ull) / 1000.0;
  const int light = 45 + static_cast<int>((static_cast<std::uint64_t>(graph) * 7ull) % 4ull) * 7;
  char buf[48];
  std::snprintf(buf, sizeof buf, "hsl(%.1f,70%%,%d%%)", hue, light);
  return buf;
}

}  // namespace

std::string render_svg(const std::vector<PlanDrawing>& panels, std::int64_t capacity,
                       const std::string& caption) {
  const double bin_w = 220.0, row_h = 16.0, gap = 12.0, left = 70.0, top = 40.0, title_h = 34.0;
  std::int64_t max_steps = 1;
  double height = top;
  for (const auto& p : panels) {
    max_steps = std::max(max_steps, p.steps_drawn);
    height += title_h + static_cast<double>(p.ranks_drawn) * (row_h + 4.0) + 24.0;
  }
  const double width = left + static_cast<double>(max_steps) * (bin_w + gap) + 20.0;
  const double scale = bin_w / static_cast<double>(capacity);
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << svg_number(width) << "\" height=\""
    << svg_number(height) << "\" viewBox=\"0 0 " << svg_number(width) << ' ' << svg_number(height)
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"10\" y=\"20\" font-size=\"13\">" << xml_escape(caption) << "</text>\n";
  double y = top;
  for (const auto& p : panels) {
    o << "<text x=\"10\" y=\"" << svg_number(y + 14) << "\" font-size=\"12\" font-weight=\"bold\">"
      << xml_escape(p.title) << "</text>\n";
    o << "<text x=\"10\" y=\"" << svg_number(y + 28) << "\" fill=\"#555\">ranks 0-" << p.ranks_drawn - 1
      << " of " << p.ranks_total << ", steps 0-" << p.steps_drawn - 1 << " of " << p.steps_total
      << "; each frame is one batch of capacity " << capacity << ", each colour one graph</text>\n";
    y += title_h;
    for (std::int64_t t = 0; t < p.steps_drawn; ++t) {
      o << "<text x=\"" << svg_number(left + static_cast<double>(t) * (bin_w + gap)) << "\" y=\""
        << svg_number(y + 10) << "\" fill=\"#555\">step " << t << "</text>\n";
    }
    y += 14.0;
    for (std::int64_t r = 0; r < p.ranks_drawn; ++r) {
      o << "<text x=\"10\" y=\"" << svg_number(y + row_h - 4) << "\">rank " << r << "</text>\n";
      for (std::int64_t t = 0; t < p.steps_drawn; ++t) {
        const double x0 = left + static_cast<double>(t) * (bin_w + gap);
        double x = x0;
        std::int64_t load = 0;
        for (const auto& [graph, size] : p.bins[static_cast<std::size_t>(r * p.steps_drawn + t)]) {
          const double w = static_cast<double>(size) * scale;
          o << "<rect x=\"" << svg_number(x) << "\" y=\"" << svg_number(y) << "\" width=\"" << svg_number(w)
            << "\" height=\"" << svg_number(row_h) << "\" fill=\"" << colour(graph) << "\"><title>graph "
            << graph << ", size " << size << "</title></rect>\n";
          x += w;
          load += size;
        }
        o << "<rect x=\"" << svg_number(x0) << "\" y=\"" << svg_number(y) << "\" width=\""
          << svg_number(bin_w) << "\" height=\"" << svg_number(row_h) << "\" fill=\"none\" stroke=\""
          << (load > capacity ? "#d00" : "#222") << "\" stroke-width=\"0.8\"><title>load " << load << " of "
          << capacity << "</title></rect>\n";
      }
      y += row_h + 4.0;
    }
    y += 10.0;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace fastmlip::pack
