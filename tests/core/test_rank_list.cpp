// Tests of core/rank_list: runs, strided runs and single ranks in the compressed text.
#include <catch2/catch_test_macros.hpp>

#include "core/rank_list.hpp"

using ppctl::core::format_rank_list;

TEST_CASE("rank lists: runs of three or more with a constant step are compressed") {
  CHECK(format_rank_list({}).empty());
  CHECK(format_rank_list({5}) == "5");
  CHECK(format_rank_list({1, 3}) == "1, 3");  // two ranks: written out
  CHECK(format_rank_list({0, 1, 2}) == "0-2");
  std::vector<int64_t> all(16);
  for (int64_t i = 0; i < 16; ++i) all[static_cast<size_t>(i)] = i;
  CHECK(format_rank_list(all) == "0-15");
  std::vector<int64_t> strided;
  for (int64_t r = 0; r <= 1008; r += 16) strided.push_back(r);
  CHECK(format_rank_list(strided) == "0-1008:16");
  CHECK(format_rank_list({0, 1, 2, 7}) == "0-2, 7");
  CHECK(format_rank_list({0, 1, 2, 7, 9, 11, 12}) == "0-2, 7-11:2, 12");
  CHECK(format_rank_list({3, 0, 2, 1, 2}) == "0-3");  // sorted, duplicates dropped
}
