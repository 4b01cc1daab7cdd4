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

TEST_CASE("the plan's rank mapping names the formula and each pipeline's ranks") {
  CHECK_THAT(plan::format_rank_mapping(plan::RankGrid(1, 2, 2)),
             ContainsSubstring("dp 2 x pp 2 = 4 ranks; rank = pp_rank x 2 + dp_rank") &&
                 ContainsSubstring("replica 1: ranks 1, 3"));
  CHECK_THAT(plan::format_rank_mapping(plan::RankGrid(2, 2, 2)),
             ContainsSubstring("tp 2 x dp 2 x pp 2 = 8 ranks; rank = (pp_rank x 2 + dp_rank) x 2 + tp_rank") &&
                 ContainsSubstring("replica 1, tp rank 1: ranks 3, 7 (pp rank 0..1)"));
  CHECK_THAT(plan::format_rank_mapping(plan::RankGrid(1, 1, 4)), ContainsSubstring("pp 4 = 4 ranks; rank = pp_rank"));
}

TEST_CASE("records of replica 0 name a pipeline rank by its global rank when the grid has other axes") {
  CHECK(plan::replica0_rank_name(3, plan::RankGrid(1, 1, 4)) == "rank 3");
  CHECK(plan::replica0_rank_name(1, plan::RankGrid(1, 2, 2)) == "rank 2 (pipeline rank 1 of replica 0)");
  CHECK(plan::replica0_rank_name(1, plan::RankGrid(2, 2, 2)) == "rank 4 (pipeline rank 1 of replica 0)");
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
  const auto text = ppctl::plan::format_rank_mapping(ppctl::plan::RankGrid(1, 16, 64));
  CHECK(text.find("replica 0: ranks 0-1008:16 (pp rank 0..63)") != std::string::npos);
  CHECK(text.find("replica 15: ranks 15-1023:16 (pp rank 0..63)") != std::string::npos);
  CHECK(ppctl::plan::format_rank_mapping(ppctl::plan::RankGrid(1, 1, 16)).find("replica 0: ranks 0-15 ") != std::string::npos);
}
