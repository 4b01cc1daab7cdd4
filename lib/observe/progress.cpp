// The terminal progress line.
#include "observe/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

namespace ppctl::observe {

std::string format_progress(int64_t step, int64_t steps, double loss, double tokens_per_s,
                            double eta_s) {
  return fmt::format("step {}/{} | loss {:.4f} | {:.0f} tok/s | ETA {}", step, steps, loss,
                     tokens_per_s, core::format_duration(eta_s));
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressLine::ProgressLine(bool enabled, std::FILE* out, std::chrono::milliseconds min_interval)
    : line_(enabled, out, min_interval) {}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(int64_t step, int64_t steps, double loss, double tokens_per_s,
                          double eta_s) {
  if (!line_.enabled()) return;
  line_.draw(format_progress(step, steps, loss, tokens_per_s, eta_s), step >= steps);
}

void ProgressLine::finish() { line_.finish(); }

}  // namespace ppctl::observe
