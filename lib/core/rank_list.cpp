// Compressed rank lists (see rank_list.hpp).
#include "core/rank_list.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ppctl::core {

std::string format_rank_list(std::vector<int64_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::vector<std::string> items;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t end = i + 1;  // one past the run starting at i
    if (i + 1 < ranks.size()) {
      const int64_t step = ranks[i + 1] - ranks[i];
      end = i + 2;
      while (end < ranks.size() && ranks[end] - ranks[end - 1] == step) ++end;
      if (end - i >= 3) {
        items.push_back(step == 1 ? fmt::format("{}-{}", ranks[i], ranks[end - 1])
                                  : fmt::format("{}-{}:{}", ranks[i], ranks[end - 1], step));
        i = end;
        continue;
      }
    }
    items.push_back(std::to_string(ranks[i]));
    ++i;
  }
  return fmt::format("{}", fmt::join(items, ", "));
}

}  // namespace ppctl::core
