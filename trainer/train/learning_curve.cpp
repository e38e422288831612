// SPDX-License-Identifier: MIT
#include "train/learning_curve.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "io/svg_text.hpp"

namespace fastmlip::trainer::train {
namespace {

using io::svg_number;
using io::xml_escape;

// Geometry of one panel (SVG user units): plot area inside the margins, legend under the title.
constexpr double kPanelW = 420, kPanelH = 320;
constexpr double kLeft = 64, kRight = 16, kTop = 48, kBottom = 44;

bool plottable(double x, double y) { return std::isfinite(x) && std::isfinite(y) && y > 0; }

void panel(std::ostringstream& svg, const CurvePanel& p, double x0) {
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin;
  double ymin = xmin, ymax = -xmin;
  for (const auto& s : p.series) {
    for (std::size_t k = 0; k < std::min(s.x.size(), s.y.size()); ++k) {
      if (plottable(s.x[k], s.y[k])) {
        xmin = std::min(xmin, s.x[k]);
        xmax = std::max(xmax, s.x[k]);
        ymin = std::min(ymin, s.y[k]);
        ymax = std::max(ymax, s.y[k]);
      }
    }
  }
  if (!std::isfinite(xmin)) {  // nothing to plot yet: an empty frame with unit ranges
    xmin = 1;
    xmax = 2;
    ymin = 1;
    ymax = 10;
  }
  if (xmax <= xmin) {
    xmax = xmin + 1;
  }
  // Whole decades on the log axis, at least one.
  const double lo = std::floor(std::log10(ymin)), hi = std::max(lo + 1, std::ceil(std::log10(ymax)));
  const double w = kPanelW - kLeft - kRight, h = kPanelH - kTop - kBottom;
  const auto px = [&](double x) { return x0 + kLeft + (x - xmin) / (xmax - xmin) * w; };
  const auto py = [&](double y) { return kTop + h - (std::log10(y) - lo) / (hi - lo) * h; };

  svg << "<g>\n<text x=\"" << svg_number(x0 + kLeft + w / 2)
      << "\" y=\"18\" text-anchor=\"middle\" font-size=\"14\">" << xml_escape(p.title) << "</text>\n";
  svg << "<rect x=\"" << svg_number(x0 + kLeft) << "\" y=\"" << svg_number(kTop) << "\" width=\""
      << svg_number(w) << "\" height=\"" << svg_number(h) << "\" fill=\"none\" stroke=\"#000\"/>\n";
  for (double d = lo; d <= hi + 0.5; d += 1) {
    const double y = kTop + h - (d - lo) / (hi - lo) * h;
    svg << "<line x1=\"" << svg_number(x0 + kLeft) << "\" y1=\"" << svg_number(y) << "\" x2=\""
        << svg_number(x0 + kLeft + w) << "\" y2=\"" << svg_number(y) << "\" stroke=\"#ddd\"/>\n";
    svg << "<text x=\"" << svg_number(x0 + kLeft - 4) << "\" y=\"" << svg_number(y + 4)
        << "\" text-anchor=\"end\" font-size=\"11\">1e" << static_cast<int>(d) << "</text>\n";
  }
  // About five integer epoch ticks.
  const double step = std::max(1.0, std::ceil((xmax - xmin) / 5));
  for (double x = std::ceil(xmin); x <= xmax + 1e-9; x += step) {
    svg << "<text x=\"" << svg_number(px(x)) << "\" y=\"" << svg_number(kTop + h + 16)
        << "\" text-anchor=\"middle\" font-size=\"11\">" << static_cast<long long>(x) << "</text>\n";
  }
  svg << "<text x=\"" << svg_number(x0 + kLeft + w / 2) << "\" y=\"" << svg_number(kPanelH - 8)
      << "\" text-anchor=\"middle\" font-size=\"12\">epoch</text>\n";
  double legend_x = x0 + kLeft;
  for (const auto& s : p.series) {
    svg << "<line x1=\"" << svg_number(legend_x) << "\" y1=\"34\" x2=\"" << svg_number(legend_x + 18)
        << "\" y2=\"34\" stroke=\"" << xml_escape(s.color) << "\" stroke-width=\"2\"/>\n";
    svg << "<text x=\"" << svg_number(legend_x + 22) << "\" y=\"38\" font-size=\"11\">" << xml_escape(s.label)
        << "</text>\n";
    legend_x += 30 + 7 * static_cast<double>(s.label.size());
    std::string points;
    for (std::size_t k = 0; k < std::min(s.x.size(), s.y.size()); ++k) {
      if (plottable(s.x[k], s.y[k])) {
        points += (points.empty() ? "" : " ") + svg_number(px(s.x[k])) + "," + svg_number(py(s.y[k]));
      }
    }
    if (!points.empty()) {
      svg << "<polyline fill=\"none\" stroke=\"" << xml_escape(s.color) << "\" stroke-width=\"1.5\" points=\""
          << points << "\"/>\n";
    }
  }
  svg << "</g>\n";
}

}  // namespace

std::string learning_curve_svg(const std::vector<CurvePanel>& panels) {
  std::ostringstream svg;
  const double width = kPanelW * static_cast<double>(std::max<std::size_t>(panels.size(), 1));
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << svg_number(width) << "\" height=\""
      << svg_number(kPanelH) << "\" viewBox=\"0 0 " << svg_number(width) << " " << svg_number(kPanelH)
      << "\" font-family=\"sans-serif\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n";
  for (std::size_t k = 0; k < panels.size(); ++k) {
    panel(svg, panels[k], kPanelW * static_cast<double>(k));
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace fastmlip::trainer::train
