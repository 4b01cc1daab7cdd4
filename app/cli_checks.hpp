// CLI11 validators shared by ppctl's commands: numbers, integers spelled as the spec's, writable files.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace ppctl::app {

/// CLI11 check: a finite number written in decimal (digits, an optional point and exponent; not hexadecimal,
/// `inf` or `nan`) of at least `min` (above it when `strict`) and at most `max`, with a readable message. A
/// decimal beyond a double (1e400) is refused as out of range.
CLI::Validator number_check(double min, bool strict, double max = std::numeric_limits<double>::max());

/// CLI11 check: an integer in [lo, hi] spelled as the spec's integers are (core/integer_text.hpp).
/// CLI11 alone reads `010` as octal 8 and takes `0x3` or `+3`.
CLI::Validator integer_check(int64_t lo, int64_t hi);

/// CLI11 check: a path where a file can be written (not a folder, device, FIFO or socket; its folder exists and
/// this user may write into it). `example` is the file name the fix suggests inside a folder given by mistake (plan.json).
CLI::Validator writable_file_check(const std::string& example = "plan.json");

}  // namespace ppctl::app
