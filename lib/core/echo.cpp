// echo_value: the cut form of a long value in an error message (see echo.hpp).
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

}  // namespace ppctl::core
