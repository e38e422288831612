// SPDX-License-Identifier: MIT
#pragma once
/// \file The learning-curve plot of train-potential (RESULTS_DIR/NAME_learning_curve.svg): an SVG
/// written by this small renderer, no plotting library. Panels side by side, each with a log-scale
/// y axis (decade ticks), a linear epoch axis, and one polyline per series; non-finite and
/// non-positive values (no validation that epoch, or a zero error) are left out of the line.
#include <string>
#include <vector>

namespace fastmlip::trainer::train {

struct CurveSeries {
  std::string label;
  std::string color;      ///< an SVG colour, e.g. "#1f77b4"
  std::vector<double> x;  ///< epochs
  std::vector<double> y;  ///< values, same length as x
};

struct CurvePanel {
  std::string title;  ///< also the y-axis label, e.g. "loss" or "RMSE F (meV/A)"
  std::vector<CurveSeries> series;
};

/// The SVG document. A series with no plottable point has a legend entry but no polyline.
std::string learning_curve_svg(const std::vector<CurvePanel>& panels);

}  // namespace fastmlip::trainer::train
