// Tests of plan/balance: the min-max split against brute force, costs shifting blocks off the heavy
// ends, balance_layers' choice by step time, FLOP costs, and make_layout honouring the spec's split.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <functional>

#include "core/error.hpp"
#include "plan/balance.hpp"
#include "plan/layout.hpp"
#include "plan/split_helpers.hpp"

using namespace ppctl;
using ppctl::test::counts_of;
using ppctl::test::every_split;
using Catch::Matchers::ContainsSubstring;

namespace {

double slowest(const std::vector<plan::LayerRange>& split, const plan::LayerCosts& costs) {
  const auto c = plan::stage_costs(split, costs);
  return *std::max_element(c.begin(), c.end());
}

}  // namespace

TEST_CASE("partition_min_max: its slowest stage is the least over every contiguous split") {
  const std::vector<plan::LayerCosts> cost_sets{
      {1.0, 0.0, 0.0}, {1.0, 0.5, 3.0}, {2.0, 7.0, 0.1}, {1.0, 0.01, 31.3}, {3.0, 2.9, 6.1}};
  for (const auto& costs : cost_sets) {
    for (int64_t layers = 1; layers <= 10; ++layers) {
      for (int64_t stages = 1; stages <= std::min<int64_t>(layers, 5); ++stages) {
        CAPTURE(costs.block, costs.embedding, costs.head, layers, stages);
        double best = 1e300;
        std::vector<int64_t> counts;
        every_split(layers, stages, counts, [&](const std::vector<int64_t>& c) {
          best = std::min(best, slowest(plan::split_from_counts(c), costs));
        });
        for (const auto tie : {plan::TieBreak::FirstStage, plan::TieBreak::LastStage}) {
          const auto split = plan::partition_min_max(layers, stages, costs, tie);
          test::require_contiguous(split, layers, stages);
          REQUIRE(slowest(split, costs) == best);
        }
      }
    }
  }
}

TEST_CASE("partition_min_max: a heavy head moves blocks off the last stage, a heavy embedding off the first") {
  using V = std::vector<int64_t>;
  CHECK(counts_of(plan::partition_min_max(8, 4, {1.0, 0.0, 0.0})) == V{2, 2, 2, 2});
  CHECK(counts_of(plan::partition_min_max(12, 4, {1.0, 0.0, 1.0})) == V{4, 3, 3, 2});
  CHECK(counts_of(plan::partition_min_max(12, 4, {1.0, 0.0, 1.0}, plan::TieBreak::LastStage)) == V{3, 3, 3, 3});
  CHECK(counts_of(plan::partition_min_max(8, 4, {1.0, 0.0, 31.0}, plan::TieBreak::LastStage)) == V{2, 2, 3, 1});
  CHECK(counts_of(plan::partition_min_max(8, 4, {1.0, 0.0, 31.0})) == V{3, 2, 2, 1});
  CHECK(counts_of(plan::partition_min_max(12, 4, {1.0, 2.0, 0.0})) == V{2, 4, 3, 3});
}

TEST_CASE("partition_min_max: refuses splits that cannot exist") {
  CHECK_THROWS_AS(plan::partition_min_max(3, 4, {}), PlanError);
  CHECK_THROWS_AS(plan::partition_min_max(4, 0, {}), PlanError);
  CHECK_THROWS_WITH(plan::partition_min_max(4, 2, {0.0, 1.0, 1.0}), ContainsSubstring("must be positive"));
}

TEST_CASE("balance_layers: keeps the uniform split unless a candidate simulates strictly faster") {
  const plan::LayerCosts costs{1.0, 0.0, 31.0};
  const plan::StepTimeOf flat = [](const std::vector<plan::LayerRange>&) { return 5.0; };
  CHECK(counts_of(plan::balance_layers(8, 4, costs, &flat)) == std::vector<int64_t>{2, 2, 2, 2});
  const plan::StepTimeOf by_slowest = [&](const std::vector<plan::LayerRange>& s) { return slowest(s, costs); };
  CHECK(counts_of(plan::balance_layers(8, 4, costs, &by_slowest)) == std::vector<int64_t>{3, 2, 2, 1});
  // A step time that prefers the last-stage tie-break's split picks it.
  const plan::StepTimeOf prefers_late = [](const std::vector<plan::LayerRange>& s) {
    return s.front().size() == 2 && s.back().size() == 1 ? 1.0 : 2.0;
  };
  CHECK(counts_of(plan::balance_layers(8, 4, costs, &prefers_late)) == std::vector<int64_t>{2, 2, 3, 1});
  CHECK(counts_of(plan::balance_layers(8, 4, costs)) == std::vector<int64_t>{3, 2, 2, 1});
}

TEST_CASE("flop_layer_costs: 24 h^2 + 4 s h per block, 2 h V for the head (arXiv 2104.04473 §5.1)") {
  config::ModelSpec m;
  m.hidden = 64;
  m.heads = 4;
  m.seq_len = 128;
  m.vocab_size = 32000;
  const auto c = plan::flop_layer_costs(m);
  CHECK(c.block == 24.0 * 64 * 64 + 4.0 * 128 * 64);
  CHECK(c.head == 2.0 * 64 * 32000 + 2.0 * 64 + 5.0 * 32000);
  CHECK(c.embedding == 2.0 * 64);
  m.arch = config::Arch::Llama;
  m.kv_heads = 2;  // kv = 2 x 16 = 32; f = int(8 x 64 / 3) rounded up to 256 = 256
  CHECK(plan::block_forward_flops(m) == 2.0 * 64 * (128 + 64) + 4.0 * 128 * 64 + 3.0 * 2 * 64 * 256);
}

TEST_CASE("make_layout: pipeline.layers_per_stage and balance auto decide the blocks of each stage") {
  config::JobSpec spec;
  spec.model.vocab_size = 32000;
  spec.model.hidden = 64;
  spec.model.heads = 4;
  spec.model.layers = 8;
  spec.pipeline.stages = 4;
  spec.pipeline.microbatches = 4;
  spec.pipeline.layers_per_stage = {1, 3, 3, 1};
  auto layout = plan::make_layout(spec);
  CHECK(counts_of({layout.stages[0].layers, layout.stages[1].layers, layout.stages[2].layers,
                   layout.stages[3].layers}) == std::vector<int64_t>{1, 3, 3, 1});
  CHECK(layout.stages[1].layers.begin == 1);
  const int64_t block = plan::block_parameters(spec.model);
  CHECK(layout.stages[1].parameters == 3 * block);
  spec.pipeline.layers_per_stage = {1, 3, 3};
  CHECK_THROWS_WITH(plan::make_layout(spec), ContainsSubstring("3 entries summing to 7"));
  spec.pipeline.layers_per_stage.clear();
  spec.pipeline.balance = "auto";
  layout = plan::make_layout(spec);
  CHECK(layout.stages[3].layers.size() == 1);  // the 32000-token head outweighs a block 30 times
  CHECK(layout.stages[1].layers.size() == 3);  // not stage 0: its embedding makes it a little dearer
  CHECK(layout.stages[0].layers.size() == 2);
}
