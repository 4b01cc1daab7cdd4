// "Did you mean ...?" for misspelt YAML keys and enum values: edit distance and the closest candidate.
#include "config/suggest.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

namespace ppctl::config {
namespace {
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string lowered(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), lower);
  return s;
}
}  // namespace

std::size_t edit_distance(const std::string& a_in, const std::string& b_in) {
  const std::string a = lowered(a_in);
  const std::string b = lowered(b_in);
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  // d[i][j] = distance between the first i characters of a and the first j of b.
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::optional<std::string> closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    const std::size_t allowed = std::max<std::size_t>(1, std::max(word.size(), candidate.size()) / 4);
    if (distance <= allowed && (!best || distance < best_distance)) {
      best = candidate;
      best_distance = distance;
    }
  }
  if (best) return best;
  if (word.size() >= 3) {
    const std::string prefix = lowered(word);
    for (const auto& candidate : candidates) {
      if (lowered(candidate).compare(0, prefix.size(), prefix) == 0) return candidate;
    }
  }
  return std::nullopt;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  if (auto match = closest_match(word, candidates)) return "did you mean '" + *match + "'?";
  return "use one of " + join_names(candidates);
}

std::string join_names(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace ppctl::config
