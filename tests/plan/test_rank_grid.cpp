// The rank grid (plan/rank_grid.hpp): tp fastest, then dp, then pp; a bijection; groups along each axis partition
// the ranks and order their members by that axis's coordinate.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <set>

#include "core/error.hpp"
#include "plan/rank_grid.hpp"

using namespace ppctl;
using plan::Axis;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("rank grid: tp fastest, then dp, then pp, a bijection; every axis's groups partition the ranks") {
  for (int64_t tp = 1; tp <= 4; ++tp) {
    for (int64_t dp = 1; dp <= 3; ++dp) {
      for (int64_t pp = 1; pp <= 3; ++pp) {
        CAPTURE(tp, dp, pp);
        const plan::RankGrid grid(tp, dp, pp);
        REQUIRE(grid.world_size() == tp * dp * pp);
        std::set<int64_t> seen;
        for (int64_t r = 0; r < grid.world_size(); ++r) {
          const auto c = grid.coords(r);
          REQUIRE((c.tp < tp && c.dp < dp && c.pp < pp));
          CHECK(r == (c.pp * dp + c.dp) * tp + c.tp);  // Megatron-Core's "tp-dp-pp"
          CHECK(grid.rank(c) == r);
          seen.insert(grid.rank(c));
          for (Axis axis : plan::kAxesFastestFirst) {
            const auto group = grid.group(axis, r);
            REQUIRE(static_cast<int64_t>(group.size()) == grid.size(axis));
            CHECK(group[static_cast<size_t>(c.at(axis))] == r);  // the group rank is the coordinate on the axis
            for (int64_t member : group) {  // the members differ from r along `axis` only
              auto m = grid.coords(member);
              m.at(axis) = c.at(axis);
              CHECK(m == c);
            }
          }
        }
        CHECK(static_cast<int64_t>(seen.size()) == grid.world_size());
        for (Axis axis : plan::kAxesFastestFirst) {
          std::set<int64_t> covered;
          const auto groups = grid.groups(axis);
          CHECK(static_cast<int64_t>(groups.size()) == grid.world_size() / grid.size(axis));
          for (const auto& g : groups) covered.insert(g.begin(), g.end());
          CHECK(static_cast<int64_t>(covered.size()) == grid.world_size());
        }
      }
    }
  }
}

TEST_CASE("rank grid: a tensor-parallel group is adjacent ranks; pipelines and replicas stride over them") {
  const plan::RankGrid grid(4, 2, 2);  // 16 ranks: two nodes of 8 when tp 4 x dp 2 fill a node
  CHECK(grid.group(Axis::tensor, 5) == std::vector<int64_t>{4, 5, 6, 7});
  CHECK(grid.group(Axis::data, 5) == std::vector<int64_t>{1, 5});
  CHECK(grid.group(Axis::pipeline, 5) == std::vector<int64_t>{5, 13});
  CHECK(grid.coords(13) == plan::RankCoords{1, 1, 1});
  CHECK(grid.rank({0, 0, 1}) == 8);
}

TEST_CASE("rank grid: describe names the sizes and the formula, leaving out axes of size 1") {
  CHECK(plan::RankGrid(1, 1, 1).describe() == "1 rank");
  CHECK(plan::RankGrid(1, 1, 4).describe() == "pp 4 = 4 ranks; rank = pp_rank");
  CHECK(plan::RankGrid(2, 1, 1).describe() == "tp 2 = 2 ranks; rank = tp_rank");
  CHECK(plan::RankGrid(1, 3, 2).describe() == "dp 3 x pp 2 = 6 ranks; rank = pp_rank x 3 + dp_rank");
  CHECK(plan::RankGrid(8, 8, 16).describe() ==
        "tp 8 x dp 8 x pp 16 = 1024 ranks; rank = (pp_rank x 8 + dp_rank) x 8 + tp_rank");
  CHECK(plan::RankGrid(8, 1, 16).describe() == "tp 8 x pp 16 = 128 ranks; rank = pp_rank x 8 + tp_rank");
}

TEST_CASE("rank grid: a size below 1 is refused naming the axis") {
  CHECK_THROWS_WITH(plan::RankGrid(0, 1, 1), ContainsSubstring("the tp size is 0"));
  CHECK_THROWS_WITH(plan::RankGrid(1, 1, -2), ContainsSubstring("the pp size is -2"));
}
