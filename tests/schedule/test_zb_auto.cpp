// Tests of zb-auto (schedule/zb_auto.hpp): W placed from costs. Over p 1..8, m 1..16 and costs that favour
// deferring W, that forbid it (a penalty larger than any step), that measure a CPU's and a tight in-flight
// limit: the program validates, it is never slower than 1F1B nor ZB-H1 under the costs it was built from,
// and no rank holds more microbatches than its limit. A golden, place_w's two ends, the text, the errors;
// an unsplit backward B (pipeline.zb_auto.b) below I + W, where 1F1B's program is chosen.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "schedule/action.hpp"
#include "schedule/generate.hpp"
#include "schedule/simulate.hpp"
#include "schedule/validate.hpp"
#include "schedule/zb_auto.hpp"

using namespace ppctl;
using namespace ppctl::schedule;
using Catch::Matchers::ContainsSubstring;
using config::ScheduleKind;

namespace {

/// zb-auto's parameters with uniform costs (ms) and the in-flight limit `max_in_flight` (0 = p).
ScheduleParams zb_auto(int64_t p, int64_t m, double f, double i, double w, double penalty,
                       int64_t max_in_flight = 0) {
  ScheduleParams params{ScheduleKind::ZBAuto, p, 1, m, 0};
  params.zb_auto.forward = {f};
  params.zb_auto.input_grad = {i};
  params.zb_auto.weight_grad = {w};
  params.zb_auto.defer_penalty = {penalty};
  params.zb_auto.max_in_flight = max_in_flight;
  return params;
}

/// Costs shaped like docs/benchmarks.md's CPU measurement ("what deferring W costs"): the first stage has
/// almost no I (token ids need no gradient) and a W as large as a backward, a deferred W costs 20% more,
/// and stages differ.
ScheduleParams measured_like(int64_t p, int64_t m) {
  ScheduleParams params{ScheduleKind::ZBAuto, p, 1, m, 0};
  auto& z = params.zb_auto;
  z.forward.clear();
  z.input_grad.clear();
  z.weight_grad.clear();
  z.defer_penalty.clear();
  for (int64_t s = 0; s < p; ++s) {
    z.forward.push_back(12.0 + 0.5 * static_cast<double>(s % 3));
    z.input_grad.push_back(s == 0 ? 0.1 : 14.8);
    z.weight_grad.push_back(s == 0 ? 21.4 : 7.7 + 0.3 * static_cast<double>(s % 2));
    z.defer_penalty.push_back(0.2 * z.weight_grad.back());
  }
  z.p2p_latency = 0.3;
  return params;
}

/// Per rank, W whose previous compute action on the rank is not their own I.
std::vector<int64_t> count_deferred(const Program& program) {
  std::vector<int64_t> out;
  for (const RankProgram& actions : program.ranks) {
    int64_t n = 0;
    for (size_t k = 0; k < actions.size(); ++k)
      if (actions[k].kind == ActionKind::W &&
          (k == 0 || actions[k - 1] != Action{ActionKind::I, actions[k].stage, actions[k].microbatch}))
        ++n;
    out.push_back(n);
  }
  return out;
}

/// What every zb-auto plan must satisfy, checked against 1F1B and ZB-H1 simulated here under the plan's
/// costs. Returns the plan.
ZbAutoPlan check_plan(const ScheduleParams& params) {
  const int64_t p = params.ranks;
  const int64_t m = params.microbatches;
  CAPTURE(p, m);
  const ZbAutoPlan plan = plan_zb_auto(params);
  INFO(plan.placement);
  REQUIRE(plan.program.num_ranks() == p);
  const Program with_comm = add_communication(plan.program);
  validate(with_comm);
  validate(add_gradient_reduction(with_comm));
  CHECK(generate_compute(params).ranks == plan.program.ranks);  // the job's program is the plan's

  const Simulation sim = simulate(with_comm, plan.costs);
  CHECK(sim.step_time == plan.step_time);
  CHECK(sim.peak_activations == plan.peak_in_flight);
  CHECK(count_deferred(plan.program) == plan.deferred_w);

  const double one = simulate(generate({ScheduleKind::OneFOneB, p, 1, m, 0}), plan.costs).step_time;
  const Simulation zb_h1 = simulate(generate({ScheduleKind::ZBH1, p, 1, m, 0}), plan.costs);
  CHECK(plan.one_f_one_b_step == one);
  CHECK(plan.zb_h1_step == zb_h1.step_time);
  CHECK(plan.step_time <= one);
  bool fits = true;
  for (int64_t r = 0; r < p; ++r) {
    CAPTURE(r);
    // The limit: max_in_flight (p when 0), never below 1F1B's own min(p - r, m).
    const int64_t given = params.zb_auto.max_in_flight > 0 ? params.zb_auto.max_in_flight : p;
    const int64_t limit = std::max(given, std::min(p - r, m));
    CHECK(plan.in_flight_limit[static_cast<size_t>(r)] == limit);
    CHECK(sim.peak_activations[static_cast<size_t>(r)] <= limit);
    fits = fits && zb_h1.peak_activations[static_cast<size_t>(r)] <= limit;
  }
  CHECK(plan.zb_h1_fits == fits);
  if (fits) CHECK(plan.step_time <= zb_h1.step_time);
  return plan;
}

}  // namespace

TEST_CASE("zb-auto, W worth deferring (W = 3 F, no penalty): valid, never slower than 1F1B or ZB-H1") {
  int64_t deferring = 0;
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t m = 1; m <= 16; ++m) {
      const ZbAutoPlan plan = check_plan(zb_auto(p, m, 1, 1, 3, 0));
      // With two stages or more the split alone shortens the I chain: strictly faster than 1F1B.
      if (p >= 2) CHECK(plan.step_time < plan.one_f_one_b_step);
      int64_t deferred = 0;
      for (const int64_t n : plan.deferred_w) deferred += n;
      if (p >= 2 && m >= 2 && deferred > 0) ++deferring;
    }
  // Deferring pays here: every pipeline of 2 stages or more with 2 microbatches or more defers some W.
  CHECK(deferring == 7 * 15);
}

TEST_CASE("zb-auto, W not worth deferring (penalty above any step): every W right after its I") {
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t m = 1; m <= 16; ++m) {
      const ScheduleParams params = zb_auto(p, m, 1, 1, 1, 1000);
      const ZbAutoPlan plan = check_plan(params);
      CAPTURE(p, m);
      CHECK(plan.deferred_w == std::vector<int64_t>(static_cast<size_t>(p), 0));
      // That is 1F1B's order with each B split into I W (place_w with lag 0), faster than 1F1B from p = 2.
      const std::vector<int64_t> zeros(static_cast<size_t>(p), 0);
      CHECK(plan.program.ranks == place_w(params, plan.costs, plan.in_flight_limit, {zeros, zeros}).ranks);
      if (p >= 2) CHECK(plan.step_time < plan.one_f_one_b_step);
    }
}

TEST_CASE("zb-auto with measured-like per-stage costs and a 20% defer penalty") {
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t m = 1; m <= 16; ++m) check_plan(measured_like(p, m));
}

TEST_CASE("zb-auto under a tight in-flight limit (1F1B's p - rank): the limit holds, ZB-H1 is not a candidate") {
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t m = 1; m <= 16; ++m) {
      const ZbAutoPlan plan = check_plan(zb_auto(p, m, 1, 1, 3, 0, 1));
      CAPTURE(p, m);
      // ZB-H1 keeps r W pending on rank r: over p - r as soon as rank 1 runs two microbatches.
      if (p >= 2 && m >= 2) CHECK_FALSE(plan.zb_h1_fits);
    }
}

TEST_CASE("zb-auto golden: p=2, m=4, F=I=W=1 ms, a deferred W 0.25 ms more") {
  // ZB-H1 defers every W of rank 1 (14 ms); W right after its I everywhere takes 14 ms too. zb-auto keeps
  // rank 1's W next to its I until the cooldown, where deferring W2 lets I3 reach rank 0 a W earlier:
  // rank 1 ends 11 + 1.25 + 1.25 = 13.5 ms (W3 follows W2, not I3: deferred too), rank 0 at 13.
  const ZbAutoPlan plan = check_plan(zb_auto(2, 4, 1, 1, 1, 0.25));
  CHECK(format_rank(plan.program.ranks[0], true) == "F0 F1 I0 W0 F2 I1 W1 F3 I2 W2 I3 W3");
  CHECK(format_rank(plan.program.ranks[1], true) == "F0 I0 W0 F1 I1 W1 F2 I2 F3 I3 W2 W3");
  CHECK(plan.step_time == 13.5);
  CHECK(plan.one_f_one_b_step == 15);
  CHECK(plan.zb_h1_step == 14);
  CHECK(plan.deferred_w == std::vector<int64_t>{0, 2});
  CHECK(plan.peak_in_flight == std::vector<int64_t>{2, 2});
  const std::string text = format_zb_auto(plan);
  CHECK_THAT(text, ContainsSubstring("W placed for F 1, I 1, W 1 ms per stage, W deferred +0.25 ms; p2p 0 ms"));
  CHECK_THAT(text, ContainsSubstring("at most 2, 2 per rank"));
  CHECK_THAT(text, ContainsSubstring("W deferred (not right after its I) per rank: 0, 2 of 4; peak in flight 2, 2"));
  CHECK_THAT(text, ContainsSubstring("simulated step 13.5 ms; 1f1b 15 ms (-10.0% against it); zb-h1 14 ms "
                                     "(-3.6% against it)"));
}

TEST_CASE("place_w: lag 0 is 1F1B with the backward split, lag r from microbatch 0 is ZB-H1") {
  const double never = std::numeric_limits<double>::infinity();
  for (int64_t p = 1; p <= 6; ++p)
    for (int64_t m = 1; m <= 10; ++m) {
      CAPTURE(p, m);
      const ScheduleParams params = zb_auto(p, m, 1, 1, 1, 0);
      const CostModel costs = zb_auto_cost_model(params);
      const auto limit = zb_auto_in_flight_limits(params);
      std::vector<int64_t> zeros(static_cast<size_t>(p), 0);
      std::vector<int64_t> ranks;
      for (int64_t r = 0; r < p; ++r) ranks.push_back(r);
      const Program zb_h1 = place_w(params, costs, limit, {ranks, zeros, never});
      CHECK(zb_h1.ranks == generate_compute({ScheduleKind::ZBH1, p, 1, m, 0}).ranks);
      const Program split = place_w(params, costs, limit, {zeros, zeros, never});
      const Program one = generate_compute({ScheduleKind::OneFOneB, p, 1, m, 0});
      for (int64_t r = 0; r < p; ++r) {
        RankProgram expected;
        for (const Action& a : one.ranks[static_cast<size_t>(r)]) {
          if (a.kind != ActionKind::B) {
            expected.push_back(a);
            continue;
          }
          expected.push_back({ActionKind::I, a.stage, a.microbatch});
          expected.push_back({ActionKind::W, a.stage, a.microbatch});
        }
        CHECK(split.ranks[static_cast<size_t>(r)] == expected);
      }
    }
}

TEST_CASE("zb-auto's cost model: per stage or one for all; bad lists and values name their key") {
  ScheduleParams params = zb_auto(3, 4, 1, 1, 1, 0);
  params.zb_auto.input_grad = {0.5, 1, 2};
  params.zb_auto.p2p_latency = 0.25;
  const CostModel costs = zb_auto_cost_model(params);
  REQUIRE(costs.stages.size() == 3);
  CHECK(costs.stages[2].input_grad == 2);
  CHECK(costs.stages[2].backward == 3);  // b not given: B = I + W, for 1F1B
  CHECK(costs.stages[1].weight_grad == 1);
  CHECK(costs.p2p_latency == 0.25);
  params.zb_auto.backward = {1.25, 1.5, 2.5};  // b given, per stage
  const CostModel with_b = zb_auto_cost_model(params);
  CHECK(with_b.stages[0].backward == 1.25);
  CHECK(with_b.stages[2].backward == 2.5);
  CHECK(with_b.stages[2].input_grad == 2);  // I and W as before
  params.zb_auto.backward = {1.75};         // one for every stage
  CHECK(zb_auto_cost_model(params).stages[1].backward == 1.75);
  params.zb_auto.backward = {1, 2};
  CHECK_THROWS_WITH(generate(params), ContainsSubstring("pipeline.zb_auto.b has 2 entries for 3 stages"));
  params.zb_auto.backward = {-1};
  CHECK_THROWS_WITH(generate(params), ContainsSubstring("pipeline.zb_auto.b[0] is -1"));
  params.zb_auto.backward.clear();

  params.zb_auto.weight_grad = {1, 2};
  CHECK_THROWS_WITH(generate(params), ContainsSubstring("pipeline.zb_auto.w has 2 entries for 3 stages"));
  params.zb_auto.weight_grad = {1};
  params.zb_auto.defer_penalty = {-0.5};
  CHECK_THROWS_WITH(generate(params), ContainsSubstring("pipeline.zb_auto.defer_penalty[0] is -0.5"));
  params.zb_auto.defer_penalty = {0};
  params.virtual_stages = 2;
  CHECK_THROWS_WITH(generate(params), ContainsSubstring("zb-auto runs one stage per rank"));
}

TEST_CASE("zb-auto with B (b) below I + W: 1F1B's unsplit program whenever it is the fastest") {
  // F = I = W = 1 ms, B = 1.2 ms (on CPUs an unsplit backward costs less than I then W). A program that
  // splits the backward runs m (F + I + W) on every rank, so where 1F1B's step is below that, only 1F1B
  // (F and B, no I nor W) can be chosen.
  int64_t fused = 0;
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t m = 1; m <= 16; ++m) {
      ScheduleParams params = zb_auto(p, m, 1, 1, 1, 0.2);
      params.zb_auto.backward = {1.2};
      const ZbAutoPlan plan = check_plan(params);
      CAPTURE(p, m);
      CHECK(plan.backward_given);
      int64_t b = 0, split = 0;
      for (const RankProgram& actions : plan.program.ranks)
        for (const Action& a : actions) {
          b += a.kind == ActionKind::B;
          split += a.kind == ActionKind::I || a.kind == ActionKind::W;
        }
      CHECK(plan.backward_split == (b == 0));
      if (b > 0) {
        ++fused;
        CHECK(split == 0);
        CHECK(plan.program.ranks == generate_compute({ScheduleKind::OneFOneB, p, 1, m, 0}).ranks);
        CHECK(plan.step_time == plan.one_f_one_b_step);
        CHECK(plan.deferred_w == std::vector<int64_t>(static_cast<size_t>(p), 0));
        // At or below every other candidate: the split ones (W after its I, ZB-H1's lags) and ZB-H1 itself.
        const std::vector<int64_t> zeros(static_cast<size_t>(p), 0);
        std::vector<int64_t> lags;
        for (int64_t r = 0; r < p; ++r) lags.push_back(r);
        for (const WPlacement& placement : {WPlacement{zeros, zeros}, WPlacement{lags, zeros, 0.0}})
          CHECK(plan.step_time <=
                simulate(place_w(params, plan.costs, plan.in_flight_limit, placement), plan.costs).step_time);
        CHECK(plan.step_time <= plan.zb_h1_step);
      }
      if (plan.one_f_one_b_step < static_cast<double>(m) * 3.0) CHECK(b > 0);
    }
  CHECK(fused > 0);
}

TEST_CASE("zb-auto with b not given places W as with b = I + W written: the same programs") {
  for (int64_t p = 1; p <= 6; ++p)
    for (int64_t m = 1; m <= 12; ++m) {
      CAPTURE(p, m);
      ScheduleParams absent = measured_like(p, m);
      ScheduleParams given = absent;
      for (int64_t s = 0; s < p; ++s)
        given.zb_auto.backward.push_back(absent.zb_auto.input_grad[static_cast<size_t>(s)] +
                                         absent.zb_auto.weight_grad[static_cast<size_t>(s)]);
      const ZbAutoPlan a = plan_zb_auto(absent);
      const ZbAutoPlan b = plan_zb_auto(given);
      CHECK(a.program.ranks == b.program.ranks);
      CHECK(a.step_time == b.step_time);
      CHECK(a.placement == b.placement);
      CHECK_FALSE(a.backward_given);
      CHECK(b.backward_given);
      // The split candidate comes first and wins ties: B = I + W never turns zb-auto into 1F1B.
      CHECK(a.backward_split);
    }
}

TEST_CASE("zb-auto's text with b given: B in the costs, and 1F1B chosen said so") {
  ScheduleParams params = zb_auto(2, 8, 1, 1, 1, 0);
  params.zb_auto.backward = {1.2};
  const ZbAutoPlan plan = check_plan(params);
  REQUIRE_FALSE(plan.backward_split);
  const std::string text = format_zb_auto(plan);
  CHECK_THAT(text, ContainsSubstring("W placed for F 1, I 1, W 1, B 1.2 ms per stage, W deferred +0 ms; p2p 0 ms"));
  CHECK_THAT(text, ContainsSubstring("B (pipeline.zb_auto.b) = I + W"));
  CHECK_THAT(text, ContainsSubstring("chosen of " + std::to_string(plan.candidates) +
                                     " placements simulated: 1F1B (the backward not split)"));
  CHECK_THAT(text, ContainsSubstring("no W: every backward runs unsplit (B), cheaper here than I then W"));
  CHECK_THAT(text, ContainsSubstring("(+0.0% against it)"));
  params.zb_auto.backward = {1.2, 1.5};
  CHECK_THAT(format_zb_auto(plan_zb_auto(params)),
             ContainsSubstring("costs per stage in ms (F, I, W, B, + when a W is deferred) 0: F 1 I 1 W 1 B 1.2 +0; "
                               "1: F 1 I 1 W 1 B 1.5 +0"));
  // Not given: no B in the costs (it is I + W).
  CHECK_THAT(format_zb_auto(plan_zb_auto(zb_auto(2, 8, 1, 1, 1, 0))),
             ContainsSubstring("W placed for F 1, I 1, W 1 ms per stage, W deferred"));
}

TEST_CASE("zb-auto stays quick on a large pipeline: p=64, m=256") {
  const ZbAutoPlan plan = plan_zb_auto(zb_auto(64, 256, 1, 1, 1, 0.2));
  validate(add_communication(plan.program));
  CHECK(plan.step_time <= plan.one_f_one_b_step);
  CHECK(plan.step_time <= plan.zb_h1_step);
}
