// Test support for the split tests (test_balance, test_layer_times): block counts of a split, and every
// contiguous split of a number of blocks over stages, for brute-force comparisons, and the shape check.
#pragma once

#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <functional>
#include <vector>

#include "plan/layout.hpp"

namespace ppctl::test {

/// The block count of each stage of `split`.
inline std::vector<int64_t> counts_of(const std::vector<plan::LayerRange>& split) {
  std::vector<int64_t> counts;
  for (const auto& r : split) counts.push_back(r.size());
  return counts;
}

/// Calls `visit` with every split of `layers` into `stages` counts >= 1 (`counts`: empty at the call).
inline void every_split(int64_t layers, int64_t stages, std::vector<int64_t>& counts,
                        const std::function<void(const std::vector<int64_t>&)>& visit) {
  if (static_cast<int64_t>(counts.size()) == stages - 1) {
    counts.push_back(layers);
    visit(counts);
    counts.pop_back();
    return;
  }
  const int64_t rest = stages - static_cast<int64_t>(counts.size()) - 1;
  for (int64_t n = 1; n <= layers - rest; ++n) {
    counts.push_back(n);
    every_split(layers - n, stages, counts, visit);
    counts.pop_back();
  }
}

/// Requires `split` to cover blocks [0, layers) with `stages` contiguous ranges of >= 1 block each.
inline void require_contiguous(const std::vector<plan::LayerRange>& split, int64_t layers, int64_t stages) {
  REQUIRE(static_cast<int64_t>(split.size()) == stages);
  REQUIRE(split.front().begin == 0);
  REQUIRE(split.back().end == layers);
  for (size_t s = 0; s < split.size(); ++s) {
    REQUIRE(split[s].size() >= 1);
    if (s > 0) REQUIRE(split[s].begin == split[s - 1].end);
  }
}

}  // namespace ppctl::test
