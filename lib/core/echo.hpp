// Echoing a user's value (a spec value, a config.json entry) in an error message, cut when long.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ppctl::core {

/// The most characters of a value an error message echoes.
inline constexpr std::size_t kMaxEchoChars = 80;

/// `text` as an error message shows it: unchanged when it has at most kMaxEchoChars bytes, else its first
/// kMaxEchoChars bytes (backed off to a UTF-8 character boundary) followed by "... (N bytes in all)", so
/// that one bad value of hundreds of KB stays one readable line. Never throws except std::bad_alloc.
std::string echo_value(std::string_view text);

}  // namespace ppctl::core
