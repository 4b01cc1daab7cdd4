// Parsing of the hidden fault-injection worker options (see fault_injection.hpp).
#include "train/fault_injection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

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

/// "A:B" with A >= min_a and B >= min_b, or nothing.
std::optional<std::pair<int64_t, int64_t>> parse_two_counts(const std::string& text, int64_t min_a,
                                                            int64_t min_b) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const auto a = parse_count(text.substr(0, colon));
  const auto b = parse_count(text.substr(colon + 1));
  if (!a || !b || *a < min_a || *b < min_b) return std::nullopt;
  return std::pair{*a, *b};
}

}  // namespace

NanInjection parse_nan_injection(const std::string& text) {
  // STAGE:STEP, then an optional :REPLICA and after it an optional :TP_RANK.
  std::vector<std::optional<int64_t>> parts;
  for (size_t begin = 0;;) {
    const auto colon = text.find(':', begin);
    parts.push_back(parse_count(text.substr(begin, colon == std::string::npos ? std::string::npos : colon - begin)));
    if (colon == std::string::npos) break;
    begin = colon + 1;
  }
  const bool valid = parts.size() >= 2 && parts.size() <= 4 &&
                     std::all_of(parts.begin(), parts.end(), [](const auto& part) { return part.has_value(); }) &&
                     *parts[1] >= 1;
  if (!valid) {
    throw Error(
        fmt::format("--inject-nan '{}': expected STAGE:STEP, STAGE:STEP:REPLICA or STAGE:STEP:REPLICA:TP_RANK, a "
                    "stage index from 0, a step from 1, a dp replica and a tp rank from 0, such as 1:3, 1:3:1 or "
                    "1:3:0:1",
                    text));
  }
  NanInjection injection{*parts[0], *parts[1], std::nullopt, std::nullopt};
  if (parts.size() >= 3) injection.replica = parts[2];
  if (parts.size() == 4) injection.tp_rank = parts[3];
  return injection;
}

std::pair<int64_t, int64_t> parse_checkpoint_crash(const std::string& text) {
  const auto parsed = parse_two_counts(text, 1, 1);
  if (!parsed) {
    throw Error(fmt::format(
        "--inject-crash-in-checkpoint '{}': expected STEP:FILES, a step from 1 and a number of "
        "files from 1, such as 4:2",
        text));
  }
  return *parsed;
}

}  // namespace ppctl::train
