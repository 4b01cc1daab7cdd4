// The in-place terminal status line and duration text.
#include "core/live_line.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

namespace ppctl::core {
namespace {

constexpr const char* kEraseLine = "\r\x1b[K";

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  const int64_t h = total / 3600, m = total / 60 % 60, s = total % 60;
  return h > 0 ? fmt::format("{}:{:02}:{:02}", h, m, s) : fmt::format("{}:{:02}", m, s);
}

LiveLine::LiveLine(bool enabled, std::FILE* out, std::chrono::milliseconds min_interval)
    : enabled_(enabled), out_(out), min_interval_(min_interval) {}

LiveLine::~LiveLine() { finish(); }

bool LiveLine::due() const {
  return enabled_ && (!open_ || std::chrono::steady_clock::now() - last_draw_ >= min_interval_);
}

void LiveLine::draw(const std::string& text, bool last) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!last && open_ && now - last_draw_ < min_interval_) return;
  const std::string line = kEraseLine + text + (last ? "\n" : "");
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
  last_draw_ = now;
  open_ = !last;
}

void LiveLine::finish() {
  if (!enabled_ || !open_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
  open_ = false;
}

}  // namespace ppctl::core
