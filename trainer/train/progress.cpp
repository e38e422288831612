// SPDX-License-Identifier: MIT
#include "train/progress.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace fastmlip::trainer::train {
namespace {

std::string clock_text(double seconds) {
  const long long s = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
  }
  return buf;
}

}  // namespace

std::string progress_line(std::int64_t step, std::int64_t total, double elapsed_s, int width) {
  total = std::max<std::int64_t>(total, 0);
  step = std::clamp<std::int64_t>(step, 0, total);
  const double frac = total > 0 ? static_cast<double>(step) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(std::floor(frac * width));
  std::string bar(static_cast<std::size_t>(width), ' ');
  for (int k = 0; k < filled; ++k) {
    bar[static_cast<std::size_t>(k)] = '=';
  }
  if (filled < width && step > 0) {
    bar[static_cast<std::size_t>(filled)] = '>';
  }
  const std::string digits = std::to_string(total);
  char count[64];
  std::snprintf(count, sizeof count, "%*lld/%lld %3d%%", static_cast<int>(digits.size()),
                static_cast<long long>(step), static_cast<long long>(total),
                static_cast<int>(std::floor(100 * frac)));
  const std::string eta =
      step > 0 ? clock_text(elapsed_s * static_cast<double>(total - step) / static_cast<double>(step))
               : "--:--";
  return "[" + bar + "] " + count + "  " + clock_text(elapsed_s) + " elapsed, ETA " + eta;
}

void ProgressBar::start(std::int64_t total, const std::string& prefix) {
  m_total = total;
  m_step = 0;
  m_prefix = prefix;
  m_start = std::chrono::steady_clock::now();
}

void ProgressBar::step() {
  ++m_step;
  if (!m_active) {
    return;
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
  const std::string line = m_prefix + progress_line(m_step, m_total, elapsed);
  // Pad over a longer previous line, so no stale characters remain.
  const std::size_t pad = m_drawn > line.size() ? m_drawn - line.size() : 0;
  m_out << '\r' << line << std::string(pad, ' ') << std::flush;
  m_drawn = line.size();
}

void ProgressBar::clear() {
  if (m_active && m_drawn > 0) {
    m_out << '\r' << std::string(m_drawn, ' ') << '\r' << std::flush;
  }
  m_drawn = 0;
}

}  // namespace fastmlip::trainer::train
