// Tests of plan/parallel: data-parallel size from the spec and the world size, the rank mapping and
// the process groups, and the dp x pp layout.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <set>

#include "core/error.hpp"
#include "plan/layout.hpp"
#include "plan/parallel.hpp"

using namespace ppctl;
using Catch::Matchers::ContainsSubstring;

namespace {

config::JobSpec spec_with(int64_t stages, int64_t data_parallel) {
  config::JobSpec spec;
  spec.model.layers = 4;
  spec.pipeline.stages = stages;
  spec.pipeline.data_parallel = data_parallel;
  spec.source = "job.yaml";
  return spec;
}

std::string failure(const config::JobSpec& spec, int64_t world) {
  try {
    plan::resolve_data_parallel(spec, world);
  } catch (const PlanError& e) {
    return e.what();
  }
  FAIL("no error");
  return "";
}

}  // namespace

TEST_CASE("data-parallel size: derived from WORLD_SIZE, 1 locally, or checked against it") {
  CHECK(plan::resolve_data_parallel(spec_with(2, 0), std::nullopt) == 1);
  CHECK(plan::resolve_data_parallel(spec_with(2, 3), std::nullopt) == 3);
  CHECK(plan::resolve_data_parallel(spec_with(2, 0), 8) == 4);
  CHECK(plan::resolve_data_parallel(spec_with(2, 2), 4) == 2);
  CHECK_THAT(failure(spec_with(4, 0), 6),
             ContainsSubstring("WORLD_SIZE=6 is not a multiple of pipeline.stages = 4"));
  CHECK_THAT(failure(spec_with(2, 2), 6),
             ContainsSubstring("WORLD_SIZE=6 but pipeline.data_parallel x pipeline.stages = 2 x 2 = 4"));
}

TEST_CASE("rank mapping: pp outermost, a bijection; groups partition the ranks") {
  for (int64_t dp = 1; dp <= 4; ++dp) {
    for (int64_t pp = 1; pp <= 4; ++pp) {
      CAPTURE(dp, pp);
      std::set<int64_t> seen;
      for (int64_t r = 0; r < dp * pp; ++r) {
        const auto c = plan::rank_coords(r, dp);
        REQUIRE(c.dp < dp);
        REQUIRE(c.pp < pp);
        CHECK(plan::global_rank(c, dp) == r);
        CHECK(r == c.pp * dp + c.dp);
        seen.insert(plan::global_rank(c, dp));
        // r is in exactly its own pipeline group (at its pp rank) and its dp group (at its dp rank).
        const auto pipe = plan::pipeline_group(c.dp, dp, pp);
        const auto data = plan::data_parallel_group(c.pp, dp, pp);
        REQUIRE(static_cast<int64_t>(pipe.size()) == pp);
        REQUIRE(static_cast<int64_t>(data.size()) == dp);
        CHECK(pipe[static_cast<size_t>(c.pp)] == r);
        CHECK(data[static_cast<size_t>(c.dp)] == r);
      }
      CHECK(static_cast<int64_t>(seen.size()) == dp * pp);
    }
  }
  CHECK(plan::pipeline_group(1, 2, 2) == std::vector<int64_t>{1, 3});
  CHECK(plan::data_parallel_group(1, 2, 2) == std::vector<int64_t>{2, 3});
  CHECK_THAT(plan::format_rank_mapping(2, 2), ContainsSubstring("rank = pp_rank x 2 + dp_rank") &&
                                                  ContainsSubstring("replica 1: ranks 1, 3"));
}

TEST_CASE("layout: world size dp x p, stages by pipeline rank") {
  const auto layout = plan::make_layout(spec_with(2, 3));
  CHECK(layout.pipeline_size == 2);
  CHECK(layout.data_parallel == 3);
  CHECK(layout.world_size == 6);
  CHECK(layout.stages.back().rank == 1);
  CHECK(plan::make_layout(spec_with(2, 0)).world_size == 2);
}

TEST_CASE("the plan's replica lines list each pipeline's ranks compressed") {
  const auto text = ppctl::plan::format_rank_mapping(16, 64);
  CHECK(text.find("replica 0: ranks 0-1008:16 (pp rank 0..63)") != std::string::npos);
  CHECK(text.find("replica 15: ranks 15-1023:16 (pp rank 0..63)") != std::string::npos);
  CHECK(ppctl::plan::format_rank_mapping(1, 16).find("replica 0: ranks 0-15 ") != std::string::npos);
}
