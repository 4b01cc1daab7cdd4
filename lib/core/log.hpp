// Logging setup: one spdlog logger for the process, prefixed with the rank in workers.
#pragma once

#include <optional>

namespace ppctl::core {

/// Configures spdlog's default logger to write to stderr with the pattern
/// `[HH:MM:SS.mmm] [launcher|rank R] level: message`. `rank` empty means the launcher / CLI.
/// Safe to call more than once (the last call wins).
void setup_logging(std::optional<int> rank);

}  // namespace ppctl::core
