// Parsing of the hidden `--inject-nan STAGE:STEP` worker option (see fault_injection.hpp).
#include "train/fault_injection.hpp"

#include <fmt/format.h>

#include <cctype>
#include <optional>

#include "core/error.hpp"

namespace ppctl::train {
namespace {

/// A non-negative integer written in digits only (at most 18, so it fits int64_t).
std::optional<int64_t> parse_count(const std::string& text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t value = 0;
  for (const char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

NanInjection parse_nan_injection(const std::string& text) {
  const auto colon = text.find(':');
  const auto stage = colon == std::string::npos ? std::nullopt : parse_count(text.substr(0, colon));
  const auto step = colon == std::string::npos ? std::nullopt : parse_count(text.substr(colon + 1));
  if (!stage || !step || *step < 1) {
    throw Error(
        fmt::format("--inject-nan '{}': expected STAGE:STEP, a stage index from 0 and a step "
                    "from 1, such as 1:3",
                    text));
  }
  return {*stage, *step};
}

}  // namespace ppctl::train
