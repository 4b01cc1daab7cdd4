// Echoing text from an input (a spec value or key, a config.json entry, a tensor name, a file path) in an
// error message: control characters and invalid UTF-8 escaped, cut when long.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ppctl::core {

/// `text` with every byte that could act on a terminal written as an escape: C0 controls (0x00-0x1f, ESC
/// among them), DEL and bytes that are not valid UTF-8 as `\xNN`, C1 controls (U+0080-U+009F) as `\u00NN`,
/// and the backslash itself as `\\` (so that an escape shown is never one the input spelled). Valid UTF-8
/// text, accents and CJK included, is kept as it is. Model folders and datasets come from strangers: a
/// tensor named "\x1b]0;pwned\x07" would otherwise retitle the terminal that prints the error.
std::string escape_control(std::string_view text);

/// The most characters of a value an error message echoes.
inline constexpr std::size_t kMaxEchoChars = 80;

/// `text` as an error message shows it, through escape_control: whole when it has at most kMaxEchoChars
/// bytes, else its first kMaxEchoChars bytes (backed off to a UTF-8 character boundary) followed by "... (N
/// bytes in all)", so that one bad value of hundreds of KB stays one readable line. Never throws except
/// std::bad_alloc.
std::string echo_value(std::string_view text);

/// The most bytes of a label (a YAML path, or "model.hidden (from FOLDER/config.json hidden_size)") an
/// error message shows whole: a file path of PATH_MAX (4096) and its key with room to spare.
inline constexpr std::size_t kMaxLabelChars = 4352;

/// `label` as an error message shows it, through escape_control: whole up to kMaxLabelChars bytes (a label names where the problem
/// is, so a long file path is not cut as a value would be), else echo_value's cut form (a key of
/// hundreds of KB typed by mistake).
std::string echo_label(std::string_view label);

/// `word` as one word of a POSIX shell command line that ppctl prints for the user to paste (`srun ... ppctl
/// train PATH`): as it is when it holds only characters no shell treats specially (letters, digits and
/// `_ . / + - : = @ , %`), else in single quotes with each `'` written `'\''`; "" becomes `''`.
std::string shell_word(std::string_view word);

}  // namespace ppctl::core
