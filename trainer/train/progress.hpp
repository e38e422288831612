// SPDX-License-Identifier: MIT
#pragma once
/// \file A one-line progress bar with an ETA for the training batches of an epoch. Only drawn
/// on a terminal (rank 0, stdout a TTY): each update rewrites the line with '\r', and the line is
/// wiped before the epoch's log line, so logs and the log file never contain it.
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace fastmlip::trainer::train {

/// "[=======>            ]  12/40  30%  0:12 elapsed, ETA 0:28": a pure function of the step
/// (batches done), the total and the seconds elapsed. ETA = elapsed * (total - step) / step
/// ("--:--" before the first step); times as m:ss, or h:mm:ss from an hour on. `width` is the
/// number of cells between the brackets.
std::string progress_line(std::int64_t step, std::int64_t total, double elapsed_s, int width = 30);

class ProgressBar {
 public:
  /// Draws nothing unless `active`.
  ProgressBar(std::ostream& out, bool active) : m_out(out), m_active(active) {}
  void start(std::int64_t total, const std::string& prefix);
  /// One more step done: redraws the line.
  void step();
  /// Wipes the line (before a log line is printed).
  void clear();

 private:
  std::ostream& m_out;
  bool m_active;
  std::string m_prefix;
  std::int64_t m_step = 0, m_total = 0;
  std::size_t m_drawn = 0;
  std::chrono::steady_clock::time_point m_start;
};

}  // namespace fastmlip::trainer::train
