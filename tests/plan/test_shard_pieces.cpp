// Tests for plan/shard_pieces: the runs of a tensor-parallel shard at one size found in the shards saved at another,
// checked row by row against the split rule itself on uneven vocabularies, fused parts and every size pair.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "plan/shard_pieces.hpp"

using namespace ppctl;

namespace {

/// The whole-tensor row of row `k` of rank `rank` of `size`'s shard of `extent` rows in `parts` components: the
/// split rule written out (component k / len, row begin + k mod len of it).
int64_t whole_row(int64_t extent, int64_t parts, int64_t size, int64_t rank, int64_t k) {
  const int64_t n = extent / parts;
  const auto [begin, end] = plan::shard_range(n, size, rank);
  const int64_t len = end - begin;
  return (k / len) * n + begin + k % len;
}

}  // namespace

TEST_CASE("shard_range balances uneven rows: vocabulary 37 over 2 and 3") {
  CHECK(plan::shard_range(37, 2, 0) == std::pair<int64_t, int64_t>{0, 19});
  CHECK(plan::shard_range(37, 2, 1) == std::pair<int64_t, int64_t>{19, 37});
  CHECK(plan::shard_range(37, 3, 0) == std::pair<int64_t, int64_t>{0, 13});
  CHECK(plan::shard_range(37, 3, 1) == std::pair<int64_t, int64_t>{13, 25});
  CHECK(plan::shard_range(37, 3, 2) == std::pair<int64_t, int64_t>{25, 37});
  CHECK(plan::shard_rows(36, 3, 2, 1) == 18);
  CHECK_THROWS_AS(plan::shard_range(2, 3, 0), InternalError);
}

TEST_CASE("shard pieces cover the wanted shard once, each row from the saved shard that holds it") {
  // vocabulary 37 (uneven) and fused qkv (3 parts of 12 rows; 12 over 5 is uneven too), every size pair up to 5.
  const auto [extent, parts] = GENERATE(std::pair<int64_t, int64_t>{37, 1}, std::pair<int64_t, int64_t>{36, 3},
                                        std::pair<int64_t, int64_t>{24, 1});
  for (int64_t saved = 1; saved <= 5; ++saved) {
    for (int64_t size = 1; size <= 5; ++size) {
      for (int64_t rank = 0; rank < size; ++rank) {
        INFO(extent << " rows in " << parts << " parts, saved at " << saved << ", rank " << rank << " of " << size);
        const auto pieces = plan::shard_pieces(extent, parts, saved, size, rank);
        const int64_t rows = plan::shard_rows(extent, parts, size, rank);
        std::vector<int> covered(static_cast<size_t>(rows), 0);
        int64_t previous_end = 0;
        for (const auto& p : pieces) {
          REQUIRE(p.length > 0);
          REQUIRE(p.source >= 0);
          REQUIRE(p.source < saved);
          CHECK(p.offset == previous_end);  // ordered, no gap
          previous_end = p.offset + p.length;
          REQUIRE(p.source_offset + p.length <= plan::shard_rows(extent, parts, saved, p.source));
          for (int64_t i = 0; i < p.length; ++i) {
            ++covered[static_cast<size_t>(p.offset + i)];
            CHECK(whole_row(extent, parts, size, rank, p.offset + i) ==
                  whole_row(extent, parts, saved, p.source, p.source_offset + i));
          }
        }
        CHECK(previous_end == rows);
        for (const int c : covered) CHECK(c == 1);
        if (saved == size) {  // the rank's own shard: one run per part, in place
          CHECK(static_cast<int64_t>(pieces.size()) == parts);
          for (const auto& p : pieces) {
            CHECK(p.source == rank);
            CHECK(p.offset == p.source_offset);
          }
        }
      }
    }
  }
}

TEST_CASE("shard pieces of 37 rows saved at 2, read at 3: rank 1 takes the end of shard 0 and the start of shard 1") {
  // Saved: [0, 19) and [19, 37); wanted at 3: rank 1 holds [13, 25).
  CHECK(plan::shard_pieces(37, 1, 2, 3, 1) ==
        std::vector<plan::ShardPiece>{{0, 13, 0, 6}, {1, 0, 6, 6}});
  // Fused 3 parts of 6 rows, saved at 2 ([0, 3), [3, 6) per part), whole at 1: shard 0's parts then shard 1's.
  CHECK(plan::shard_pieces(18, 3, 2, 1, 0) ==
        std::vector<plan::ShardPiece>{{0, 0, 0, 3}, {1, 0, 3, 3}, {0, 3, 6, 3}, {1, 3, 9, 3}, {0, 6, 12, 3},
                                      {1, 6, 15, 3}});
}
