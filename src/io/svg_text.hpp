// SPDX-License-Identifier: MIT
#pragma once
/// \file Text helpers of the project's hand-written SVG drawings (fastmlip-pack's plan pictures,
/// train-potential's learning curve): XML escaping and coordinates with two decimals, which keeps
/// the files small and stable from run to run.
#include <cstdio>
#include <string>

namespace fastmlip::io {

/// `s` with &, <, > and " replaced by their XML entities (text and attribute values).
inline std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

/// A coordinate or length: fixed point, two decimals.
inline std::string svg_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace fastmlip::io
