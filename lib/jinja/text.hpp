// Python's str methods over UTF-8 text: code points, whitespace, strip, split, case, and string quoting.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ppctl::jinja::text {

/// Byte offsets where each code point of `s` starts, plus s.size() at the end (so size() - 1 code points).
/// A byte that starts no valid sequence counts as one code point of its own, so slices keep every byte.
std::vector<size_t> code_point_offsets(std::string_view s);
/// The code point at the start of `s` (and its length in bytes through `length`); a bad byte reads as itself.
char32_t decode_one(std::string_view s, size_t* length);
/// Appends the UTF-8 bytes of `cp`.
void append_utf8(std::string& out, char32_t cp);
/// Python's str.isspace() for one code point.
bool is_space(char32_t cp);
/// str.strip / lstrip / rstrip: `chars` unset strips whitespace, else any of its code points.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
/// str.split(sep, maxsplit) (from the left) or str.rsplit (from the right); sep unset splits on runs of
/// whitespace and drops empty parts. EvalError-free: an empty `sep` is the caller's to refuse.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, long maxsplit,
                               bool from_right);
/// str.splitlines(): lines without their ends (\n, \r\n, \r, \v, \f, \x1c-\x1e, \x85, U+2028, U+2029).
std::vector<std::string> splitlines(std::string_view s);
/// str.replace(old, new, count); count < 0 replaces all. An empty `old` inserts between code points.
std::string replace(std::string_view s, std::string_view old, std::string_view with, long count);
/// str.upper / lower / title / capitalize (ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic letters change
/// case; other code points stay as they are).
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);
std::string capitalize(std::string_view s);
/// Python's repr(str): quoted with ' (or " when only ' occurs), non-printable code points escaped.
std::string repr(std::string_view s);

}  // namespace ppctl::jinja::text
