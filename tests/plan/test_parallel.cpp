// Tests of plan/parallel: data-parallel size from the spec and the world size, the rank mapping and
// the process groups, and the dp x pp layout.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
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

TEST_CASE("data-parallel size with tensor parallelism: WORLD_SIZE / (t x p), the message names every factor") {
  auto spec = spec_with(2, 0);
  spec.pipeline.tensor_parallel = 4;
  CHECK(plan::resolve_data_parallel(spec, 16) == 2);
  CHECK_THAT(failure(spec, 12),
             ContainsSubstring("WORLD_SIZE=12 is not a multiple of pipeline.tensor_parallel x pipeline.stages = 4 x "
                               "2 = 8: every data-parallel replica needs 8 ranks"));
  spec.pipeline.data_parallel = 3;
  CHECK_THAT(failure(spec, 16),
             ContainsSubstring("WORLD_SIZE=16 but pipeline.tensor_parallel x pipeline.data_parallel x "
                               "pipeline.stages = 4 x 3 x 2 = 24 (fix: start exactly 24 workers"));
  plan::Layout layout;
  layout.tensor_parallel = 4;
  layout.data_parallel = 3;
  layout.pipeline_size = 2;
  CHECK(layout.grid().world_size() == 24);
  CHECK(layout.grid().coords(5).tp == 1);  // rank 5 = (0 x 3 + 1) x 4 + 1
  CHECK(layout.grid().coords(5).dp == 1);
}

TEST_CASE("a tensor-parallel group must sit on one node: t divides every node's workers") {
  auto spec = spec_with(2, 0);
  spec.pipeline.tensor_parallel = 8;
  CHECK_NOTHROW(plan::check_tensor_parallel_per_node(spec, {8}, "LOCAL_WORLD_SIZE=8"));
  CHECK_NOTHROW(plan::check_tensor_parallel_per_node(spec, {16, 8}, "SLURM_STEP_TASKS_PER_NODE=16,8"));
  CHECK_NOTHROW(plan::check_tensor_parallel_per_node(spec, {}, ""));  // not said: not checked
  const auto refusal = [&](const std::vector<int>& nodes, const std::string& source) {
    try {
      plan::check_tensor_parallel_per_node(spec, nodes, source);
    } catch (const PlanError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(refusal({4}, "LOCAL_WORLD_SIZE=4"),
             ContainsSubstring("pipeline.tensor_parallel = 8 but LOCAL_WORLD_SIZE=4 puts 4 workers on a node: a "
                               "tensor-parallel group of 8 adjacent ranks must sit on one node, so every node's count "
                               "must be a multiple of 8 (fix: start a multiple of 8 workers on every node"));
  // A node of 12 would hold one group and half of another: refused though 12 is above t; the smallest odd count named.
  CHECK_THAT(refusal({8, 12, 4}, "SLURM_STEP_TASKS_PER_NODE=8,12,4"),
             ContainsSubstring("SLURM_STEP_TASKS_PER_NODE=8,12,4 puts 4 workers on a node"));
  spec.pipeline.tensor_parallel = 1;
  CHECK_NOTHROW(plan::check_tensor_parallel_per_node(spec, {3}, "LOCAL_WORLD_SIZE=3"));
}

TEST_CASE("the plan's rank mapping names the formula and each pipeline's ranks") {
  CHECK_THAT(plan::format_rank_mapping(plan::RankGrid(1, 2, 2)),
             ContainsSubstring("dp 2 x pp 2 = 4 ranks; rank = pp_rank x 2 + dp_rank") &&
                 ContainsSubstring("replica 1: ranks 1, 3"));
  CHECK_THAT(plan::format_rank_mapping(plan::RankGrid(2, 2, 2)),
             ContainsSubstring("tp 2 x dp 2 x pp 2 = 8 ranks; rank = (pp_rank x 2 + dp_rank) x 2 + tp_rank") &&
                 ContainsSubstring("tp groups: 4 of 2 adjacent ranks, 0-1, 2-3, 4-5, 6-7 (each on one node") &&
                 ContainsSubstring("replica 1: tp groups 2-3, 6-7 (pp rank 0..1)"));
  // At scale: the first two and the last of each list, one line per replica.
  const auto large = plan::format_rank_mapping(plan::RankGrid(8, 8, 16));
  CHECK_THAT(large, ContainsSubstring("tp groups: 128 of 8 adjacent ranks, 0-7, 8-15, ..., 1016-1023 ") &&
                        ContainsSubstring("replica 7: tp groups 56-63, 120-127, ..., 1016-1023 (pp rank 0..15)\n"));
  CHECK(std::count(large.begin(), large.end(), '\n') == 1 + 1 + 8);
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
