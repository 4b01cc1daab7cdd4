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

/// The most bytes of a label (a YAML path, or "model.hidden (from FOLDER/config.json hidden_size)") an
/// error message shows whole: a file path of PATH_MAX (4096) and its key with room to spare.
inline constexpr std::size_t kMaxLabelChars = 4352;

/// `label` as an error message shows it: whole up to kMaxLabelChars bytes (a label names where the problem
/// is, so a long file path is not cut as a value would be), else echo_value's cut form (a key of
/// hundreds of KB typed by mistake).
std::string echo_label(std::string_view label);

}  // namespace ppctl::core
