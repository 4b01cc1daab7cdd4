// The terminal progress line.
#include "train/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>

namespace ppctl::train {
namespace {

/// "1:02:03", "2:05", "0:05"; "?" for a negative or non-finite time.
std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  const int64_t h = total / 3600, m = total / 60 % 60, s = total % 60;
  return h > 0 ? fmt::format("{}:{:02}:{:02}", h, m, s) : fmt::format("{}:{:02}", m, s);
}

constexpr const char* kEraseLine = "\r\x1b[K";

}  // namespace

std::string format_progress(int64_t step, int64_t steps, double loss, double tokens_per_s,
                            double eta_s) {
  return fmt::format("step {}/{} | loss {:.4f} | {:.0f} tok/s | ETA {}", step, steps, loss,
                     tokens_per_s, format_duration(eta_s));
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressLine::ProgressLine(bool enabled, std::FILE* out, std::chrono::milliseconds min_interval)
    : enabled_(enabled), out_(out), min_interval_(min_interval) {}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(int64_t step, int64_t steps, double loss, double tokens_per_s,
                          double eta_s) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool last = step >= steps;
  if (!last && open_ && now - last_draw_ < min_interval_) return;
  const std::string text = kEraseLine + format_progress(step, steps, loss, tokens_per_s, eta_s) +
                           (last ? "\n" : "");
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
  last_draw_ = now;
  open_ = !last;
}

void ProgressLine::finish() {
  if (!enabled_ || !open_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
  open_ = false;
}

}  // namespace ppctl::train
