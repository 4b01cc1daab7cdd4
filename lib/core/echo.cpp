// echo_value and echo_label: the cut form of a long value or label in an error message (see echo.hpp).
#include "core/echo.hpp"

#include <fmt/format.h>

namespace ppctl::core {

std::string echo_value(std::string_view text) {
  if (text.size() <= kMaxEchoChars) return std::string(text);
  std::size_t end = kMaxEchoChars;
  // Back off over UTF-8 continuation bytes (10xxxxxx) so that no character is split.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return fmt::format("{}... ({} bytes in all)", text.substr(0, end), text.size());
}

std::string echo_label(std::string_view label) {
  return label.size() <= kMaxLabelChars ? std::string(label) : echo_value(label);
}

}  // namespace ppctl::core
