// Logging setup: one spdlog logger for the process, prefixed with the rank in workers.
#pragma once

#include <optional>
#include <string>

namespace ppctl::core {

/// Configures spdlog's default logger to write to stderr with the pattern
/// `[HH:MM:SS.mmm] [launcher|rank R] level: message`. `rank` empty means the launcher / CLI.
/// Safe to call more than once (the last call wins). When stderr is a terminal every line begins with
/// "\r\x1b[K" (back to the line's start, erase it), so a line replaces a progress line drawn there
/// (observe/progress.hpp) instead of running into it; not on a pipe or file.
void setup_logging(std::optional<int> rank);

/// Also writes every later log line of this process to `path` (appended; without colours or the
/// terminal's erase sequence). Throws ppctl::Error naming the path when it cannot be opened.
void add_log_file(const std::string& path);

}  // namespace ppctl::core
