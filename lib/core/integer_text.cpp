// Plain decimal integer texts (see integer_text.hpp).
#include "core/integer_text.hpp"

#include <charconv>
#include <regex>

namespace ppctl::core {

bool is_plain_integer_text(const std::string& text) {
  static const std::regex pattern("0|-?[1-9][0-9]*");
  return std::regex_match(text, pattern);
}

std::optional<int64_t> parse_plain_integer(const std::string& text) {
  if (!is_plain_integer_text(text)) return std::nullopt;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace ppctl::core
