// The one spelling of an integer that ppctl accepts everywhere (spec fields, command-line options,
// launcher environment variables): `0`, or an optional '-' and decimal digits without leading zeros.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ppctl::core {

/// True for `0`, `7`, `-12`; false for `+3`, `03`, `-0`, `0x3`, `1e3`, `3.0`, ` 3` or "" (YAML 1.1 and
/// C's strtol base 0 read `010` as octal 8: one spelling avoids that ambiguity).
bool is_plain_integer_text(const std::string& text);

/// The value of a plain integer text (is_plain_integer_text) that fits int64_t; nullopt otherwise.
std::optional<int64_t> parse_plain_integer(const std::string& text);

}  // namespace ppctl::core
