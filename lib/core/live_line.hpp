// A status line redrawn in place on a terminal (\r, erase, text), throttled; and the H:MM:SS text of
// a duration. Used by the training progress line and by `ppctl data prepare`.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace ppctl::core {

/// "1:02:03" (H:MM:SS from an hour on), "2:05", "0:05" (M:SS below); "?" for a negative or non-finite
/// time. `seconds` is rounded to the nearest second.
std::string format_duration(double seconds);

/// Draws one line of text on `out` when `enabled`, else does nothing at all (so nothing but plain
/// lines reaches a pipe or a file). Each draw is one write of "\r\x1b[K" (carriage return, erase the
/// line) and the text without a newline, at most every `min_interval`; the last draw always happens
/// and ends the line with a newline.
class LiveLine {
 public:
  explicit LiveLine(bool enabled, std::FILE* out = stderr,
                    std::chrono::milliseconds min_interval = std::chrono::milliseconds(100));
  LiveLine(const LiveLine&) = delete;
  LiveLine& operator=(const LiveLine&) = delete;
  ~LiveLine();

  bool enabled() const { return enabled_; }
  /// Shows `text` in place of the line drawn before; skipped when the previous draw is younger than
  /// min_interval, unless `last` (which also ends the line).
  void draw(const std::string& text, bool last);
  /// Whether a draw that is not the last would be shown now (enabled, and min_interval has passed
  /// since the previous draw): lets a caller skip building text that would be thrown away.
  bool due() const;
  /// Ends a line left open (a newline), e.g. before closing log lines or on failure.
  void finish();

 private:
  bool enabled_;
  std::FILE* out_;
  std::chrono::milliseconds min_interval_;
  std::chrono::steady_clock::time_point last_draw_{};
  bool open_ = false;  // a line is drawn without its newline
};

}  // namespace ppctl::core
