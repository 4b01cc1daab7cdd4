// Tests of plan/layer_times: the min-max split of blocks of any cost against brute force, stage sums, the
// fastest candidate, the FLOP times, and the fit of per-layer times from per-stage measurements.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <functional>
#include <random>

#include "core/error.hpp"
#include "plan/layer_times.hpp"
#include "plan/split_helpers.hpp"

using namespace ppctl;
using ppctl::test::counts_of;
using ppctl::test::every_split;
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;

namespace {

double slowest(const std::vector<plan::LayerRange>& split, const plan::LayerTimes& times) {
  double out = 0.0;
  for (const auto& t : plan::stage_times(split, times)) out = std::max(out, t.total());
  return out;
}

}  // namespace

TEST_CASE("partition_min_max(times): the least slowest stage over every contiguous split, blocks of any cost") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.1, 5.0);
  std::uniform_real_distribution<double> end_cost(0.0, 20.0);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t layers = 1 + trial % 9;
    plan::LayerTimes times;
    for (int64_t b = 0; b < layers; ++b) times.blocks.push_back({cost(rng), cost(rng)});
    times.embedding = {end_cost(rng) / 4, end_cost(rng) / 4};
    times.head = {end_cost(rng), end_cost(rng)};
    for (int64_t stages = 1; stages <= std::min<int64_t>(layers, 5); ++stages) {
      CAPTURE(trial, layers, stages);
      double best = 1e300;
      std::vector<int64_t> counts;
      every_split(layers, stages, counts, [&](const std::vector<int64_t>& c) {
        best = std::min(best, slowest(plan::split_from_counts(c), times));
      });
      for (const auto tie : {plan::TieBreak::FirstStage, plan::TieBreak::LastStage}) {
        const auto split = plan::partition_min_max(times, stages, tie);
        test::require_contiguous(split, layers, stages);
        REQUIRE(slowest(split, times) <= best * (1 + 1e-9));
      }
    }
  }
}

TEST_CASE("partition_min_max(times): a heavy head empties the last stage; ties fill from the chosen end") {
  plan::LayerTimes times;
  times.blocks.assign(8, {1.0, 2.0});
  times.head = {20.0, 10.0};  // 10 blocks' worth
  CHECK(counts_of(plan::partition_min_max(times, 4)) == std::vector<int64_t>{3, 2, 2, 1});
  CHECK(counts_of(plan::partition_min_max(times, 4, plan::TieBreak::LastStage)) == std::vector<int64_t>{2, 2, 3, 1});
  times.head = {};
  CHECK(counts_of(plan::partition_min_max(times, 4)) == std::vector<int64_t>{2, 2, 2, 2});
  times.blocks[5] = {9.0, 9.0};  // one expensive block gets a stage of its own
  const auto split = plan::partition_min_max(times, 4);
  CHECK(slowest(split, times) == 18.0);
  CHECK_THROWS_AS(plan::partition_min_max(times, 9), PlanError);
  CHECK_THROWS_AS(plan::partition_min_max(times, 0), PlanError);
}

TEST_CASE("stage_times adds the embedding to stage 0 and the head to the last; layer_times is the FLOP ratio") {
  const auto t = plan::layer_times({2.0, 1.0, 10.0}, 4);
  REQUIRE(t.blocks.size() == 4);
  CHECK(t.blocks[0].forward_ms == 1.0);
  CHECK(t.blocks[0].backward_ms == 2.0);
  const auto stages = plan::stage_times(plan::split_from_counts({1, 3}), t);
  CHECK(stages[0].forward_ms == 1.5);
  CHECK(stages[1].forward_ms == 8.0);
  CHECK(stages[1].backward_ms == 16.0);
  const auto one = plan::stage_times(plan::split_from_counts({4}), t);
  CHECK(one[0].forward_ms == 4.0 + 0.5 + 5.0);
}

TEST_CASE("fastest_split: the least step time, the first on a tie") {
  const std::vector<std::vector<plan::LayerRange>> c{plan::split_from_counts({2, 2}), plan::split_from_counts({3, 1}),
                                                     plan::split_from_counts({1, 3})};
  CHECK(counts_of(plan::fastest_split(c, [](const auto&) { return 1.0; })) == std::vector<int64_t>{2, 2});
  CHECK(counts_of(plan::fastest_split(c, [](const auto& s) { return s.back().size() == 3 ? 0.5 : 1.0; })) ==
        std::vector<int64_t>{1, 3});
}

TEST_CASE("fit_layer_times: recovers block, embedding and head times from per-stage sums") {
  const plan::PieceTime block{0.7, 2.1}, embedding{0.1, 0.4}, head{7.0, 5.5};
  const std::vector<int64_t> counts{2, 3, 2, 1};
  std::vector<plan::StageMeasurement> measured;
  for (size_t s = 0; s < counts.size(); ++s) {
    plan::PieceTime t{counts[s] * block.forward_ms, counts[s] * block.backward_ms};
    if (s == 0) t = {t.forward_ms + embedding.forward_ms, t.backward_ms + embedding.backward_ms};
    if (s + 1 == counts.size()) t = {t.forward_ms + head.forward_ms, t.backward_ms + head.backward_ms};
    measured.push_back({counts[s], t});
  }
  std::vector<std::string> notes;
  auto fit = plan::fit_layer_times(measured, 8, 0.01, notes);
  CHECK(notes.empty());
  REQUIRE(fit.blocks.size() == 8);
  CHECK(fit.blocks[5].forward_ms == Approx(0.7));
  CHECK(fit.blocks[5].backward_ms == Approx(2.1));
  CHECK(fit.embedding.forward_ms == Approx(0.1));
  CHECK(fit.embedding.backward_ms == Approx(0.4));
  CHECK(fit.head.forward_ms == Approx(7.0));
  CHECK(fit.head.backward_ms == Approx(5.5));
  // Two stages: the embedding is taken at the given ratio to a block, which fixes the block from stage 0.
  const std::vector<plan::StageMeasurement> two{{3, {3 * 0.7 + 0.07, 3 * 2.1 + 0.21}}, {1, {0.7 + 7.0, 2.1 + 5.5}}};
  fit = plan::fit_layer_times(two, 4, 0.1, notes);
  CHECK(fit.blocks[0].forward_ms == Approx(0.7));
  CHECK(fit.head.forward_ms == Approx(7.0));
  CHECK(fit.head.backward_ms == Approx(5.5));
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], ContainsSubstring("2 stages"));
  // A first stage faster than its blocks (noise): the embedding is floored at 0, with a note.
  measured[0].time.backward_ms = 1.0;
  notes.clear();
  fit = plan::fit_layer_times(measured, 8, 0.01, notes);
  CHECK(fit.embedding.backward_ms == 0.0);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], ContainsSubstring("negative parts taken as 0"));
  CHECK_THROWS_WITH(plan::fit_layer_times({measured[0]}, 8, 0.01, notes), ContainsSubstring("pipeline.stages >= 2"));
}
