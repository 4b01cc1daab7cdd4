// The progress line: on a terminal one line, redrawn in place (\r), with step/total, loss, tokens/s
// and the estimated time left; nothing at all when stderr is not a terminal (plain log lines instead).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/live_line.hpp"

namespace ppctl::observe {

/// "step 12/20 | loss 3.1234 | 8123 tok/s | ETA 0:05" (ETA as H:MM:SS, or M:SS under an hour).
std::string format_progress(int64_t step, int64_t steps, double loss, double tokens_per_s,
                            double eta_s);

/// Whether this process's stderr is a terminal (isatty(2)). Workers inherit the launcher's stderr,
/// so every process of a local job gives the same answer.
bool stderr_is_terminal();

/// Draws the progress line on `out` when `enabled`, else does nothing. Each draw is one write of
/// "\r\x1b[K" (carriage return, erase the line) and the text, without a newline, at most every
/// `min_interval` (the last step always draws and ends the line with a newline). Log lines written
/// while it is drawn begin with the same erase sequence on a terminal (core::setup_logging), so they
/// replace the progress line instead of running into it; the next draw puts it back below them.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled, std::FILE* out = stderr,
                        std::chrono::milliseconds min_interval = std::chrono::milliseconds(100));
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine();

  bool enabled() const { return line_.enabled(); }
  /// Shows step `step` of `steps` (1-based) with its loss and throughput; `eta_s` seconds left.
  void update(int64_t step, int64_t steps, double loss, double tokens_per_s, double eta_s);
  /// Ends a line left open (a newline), e.g. before the run's closing log lines or on failure.
  void finish();

 private:
  core::LiveLine line_;
};

}  // namespace ppctl::observe
