// Tests of REDUCE_GRAD in the schedule IR: add_gradient_reduction's placement (goldens, and every
// generated family over a grid), the validator's rules for it, job_program, and the simulated
// gradient reductions (overlapped with REDUCE_GRAD, or after the schedule) and their cost.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "schedule/action.hpp"
#include "schedule/generate.hpp"
#include "schedule/job_program.hpp"
#include "schedule/simulate.hpp"
#include "schedule/split_time.hpp"
#include "schedule/validate.hpp"
#include "support/errors.hpp"
#include "support/memory_spec.hpp"
#include "support/program_text.hpp"

using namespace ppctl;
using namespace ppctl::schedule;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::EndsWith;
using config::ScheduleKind;
using test::hand_made;

namespace {

/// The message validate() throws for `program` (fails the test if it does not throw).
std::string error_of(const Program& program) {
  return test::message_of<ScheduleError>(
      [&] { validate(program); }, "validate() accepted a broken program:\n" + format_grid(program));
}

bool is_backward(ActionKind kind) {
  return kind == ActionKind::B || kind == ActionKind::I || kind == ActionKind::W;
}

/// Every generated family's parameters over a grid: p 1..5, m 1..9 (interleaved: v 2..3, m a
/// multiple of p, which its group rule allows).
std::vector<ScheduleParams> family_grid() {
  std::vector<ScheduleParams> out;
  for (int64_t p = 1; p <= 5; ++p)
    for (int64_t m = 1; m <= 9; ++m) {
      for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZBH1})
        out.push_back({kind, p, 1, m, 0});
      out.push_back({ScheduleKind::ZBV, p, 2, m, 0});
      if (m % p == 0)
        for (int64_t v = 2; v <= 3; ++v) out.push_back({ScheduleKind::Interleaved1F1B, p, v, m, 0});
    }
  return out;
}

/// Index of the only REDUCE_GRAD(stage) on `actions` (fails when there is none or more than one).
size_t reduce_position(const RankProgram& actions, int64_t stage) {
  const Action reduce{ActionKind::REDUCE_GRAD, stage, 0};
  REQUIRE(std::count(actions.begin(), actions.end(), reduce) == 1);
  return static_cast<size_t>(std::find(actions.begin(), actions.end(), reduce) - actions.begin());
}

/// `program` with REDUCE_GRAD(stage) moved to just before the action `before` on the stage's rank.
Program moved_before(Program program, int64_t stage, const Action& before) {
  RankProgram& actions =
      program.ranks[static_cast<size_t>(program.stage_to_rank[static_cast<size_t>(stage)])];
  actions.erase(actions.begin() + static_cast<std::ptrdiff_t>(reduce_position(actions, stage)));
  actions.insert(std::find(actions.begin(), actions.end(), before),
                 Action{ActionKind::REDUCE_GRAD, stage, 0});
  return program;
}

/// The last action of `kind` of `stage` on the stage's rank.
Action last_of(const Program& program, int64_t stage, ActionKind kind) {
  const RankProgram& actions =
      program.ranks[static_cast<size_t>(program.stage_to_rank[static_cast<size_t>(stage)])];
  const auto it = std::find_if(actions.rbegin(), actions.rend(), [&](const Action& a) {
    return a.kind == kind && a.stage == stage;
  });
  REQUIRE(it != actions.rend());
  return *it;
}

CostModel costs_with(double grad_reduce) {
  CostModel costs;
  costs.stages = {StageCosts{1.0, 2.0, 1.0, 1.0}};
  costs.grad_reduce = grad_reduce;
  return costs;
}

}  // namespace

TEST_CASE("add_gradient_reduction golden: p=2, m=2 1F1B, after the last B and its SEND_B") {
  const Program program = add_gradient_reduction(generate(ScheduleKind::OneFOneB, 2, 2));
  CHECK(format_rank(program.ranks[0], false) ==
        "0F0 0SEND_F0 0RECV_B0 0F1 0SEND_F1 0RECV_B1 0B0 0B1 0REDUCE_GRAD");
  CHECK(format_rank(program.ranks[1], false) ==
        "1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1 1REDUCE_GRAD");
  CHECK(format_rank(program.ranks[1], true) == "F0 B0 F1 B1");  // compute only leaves it out
  CHECK_NOTHROW(validate(program));
}

TEST_CASE("add_gradient_reduction: ZBV p=2, m=4, the last stage's reduction mid-rank") {
  // test_generate's ZBV golden with the reductions: stage 3 (rank 0's second) is done at 3W3, long
  // before stage 0's last backward, 0W3, which ends the rank.
  const Program program = add_gradient_reduction(generate_compute({ScheduleKind::ZBV, 2, 2, 4, 0}));
  CHECK_THAT(format_rank(program.ranks[0], false),
             ContainsSubstring(" 3I3 3W3 3REDUCE_GRAD 0I2 ") && EndsWith(" 0W3 0REDUCE_GRAD"));
  CHECK_THAT(format_rank(program.ranks[1], false), EndsWith(" 1W2 2W3 2REDUCE_GRAD 1W3 1REDUCE_GRAD"));
}

TEST_CASE("add_gradient_reduction refuses a program that already reduces, or a stage without backward") {
  const Program once = add_gradient_reduction(generate(ScheduleKind::GPipe, 2, 2));
  CHECK_THROWS_WITH(add_gradient_reduction(once),
                    ContainsSubstring("rank 0 already holds 0REDUCE_GRAD") &&
                        ContainsSubstring("pass the program before add_gradient_reduction"));
  CHECK_THROWS_WITH(add_gradient_reduction(hand_made(1, {0, 1}, {"0F0 0B0", "1F0"})),
                    ContainsSubstring("stage 1 has no B, I or W on rank 1"));
  CHECK_THROWS_WITH(add_gradient_reduction(hand_made(1, {0, 0}, {"0F0 1F0 0B0"})),
                    ContainsSubstring("stage 1 has no B, I or W on rank 0"));
}

TEST_CASE("every generated family: one REDUCE_GRAD per stage, right after its last backward") {
  for (const ScheduleParams& params : family_grid()) {
    CAPTURE(config::to_string(params.kind), params.ranks, params.virtual_stages, params.microbatches);
    const Program before = generate(params);
    const Program program = add_gradient_reduction(before);
    REQUIRE_NOTHROW(validate(program));
    int64_t reductions = 0;
    for (const RankProgram& actions : program.ranks)
      reductions += std::count_if(actions.begin(), actions.end(),
                                  [](const Action& a) { return is_reduce(a.kind); });
    CHECK(reductions == program.num_stages);
    for (int64_t s = 0; s < program.num_stages; ++s) {
      CAPTURE(s);
      const auto rank = static_cast<size_t>(program.stage_to_rank[static_cast<size_t>(s)]);
      const RankProgram& actions = program.ranks[rank];
      const size_t at = reduce_position(actions, s);
      REQUIRE(at >= 1);
      // Right after the backward, or after the SEND_B of that backward that directly follows it.
      size_t last = at - 1;
      if (actions[last].kind == ActionKind::SEND_B) {
        REQUIRE(last >= 1);
        const Action send = actions[last--];
        CHECK((actions[last].kind == ActionKind::B || actions[last].kind == ActionKind::I));
        CHECK(actions[last].microbatch == send.microbatch);
        CHECK(send.stage == s);
      }
      CHECK(actions[last].stage == s);
      CHECK(is_backward(actions[last].kind));
      for (size_t i = at + 1; i < actions.size(); ++i)
        CHECK(!(actions[i].stage == s && is_backward(actions[i].kind)));
      // Nothing else moved: without the REDUCE_GRADs the program is add_communication's.
      RankProgram without;
      for (const Action& a : actions)
        if (!is_reduce(a.kind)) without.push_back(a);
      CHECK(without == before.ranks[rank]);
    }
  }
}

TEST_CASE("validate: a program without REDUCE_GRAD, or with one for some stages only, is valid") {
  Program program = add_gradient_reduction(generate({ScheduleKind::Interleaved1F1B, 2, 2, 4, 0}));
  CHECK_NOTHROW(validate(generate({ScheduleKind::Interleaved1F1B, 2, 2, 4, 0})));
  auto& rank0 = program.ranks[0];
  rank0.erase(rank0.begin() + static_cast<std::ptrdiff_t>(reduce_position(rank0, 2)));
  CHECK_NOTHROW(validate(program));
}

TEST_CASE("validate: REDUCE_GRAD before the stage's last B is refused (1F1B)") {
  const Program program = add_gradient_reduction(generate(ScheduleKind::OneFOneB, 4, 8));
  const std::string message = error_of(moved_before(program, 0, parse_action("0B7")));
  CHECK_THAT(message, ContainsSubstring("(rule: REDUCE_GRAD after every B, I and W of its stage)"));
  CHECK_THAT(message, ContainsSubstring("0REDUCE_GRAD comes before 0B7"));
  CHECK_THAT(message, ContainsSubstring("(rank 0, position"));
  CHECK_THAT(message, ContainsSubstring("[0REDUCE_GRAD] 0B7"));
  // Any earlier B of the stage too (here the last rank's first).
  const std::string early = error_of(moved_before(program, 3, parse_action("3B0")));
  CHECK_THAT(early, ContainsSubstring("3REDUCE_GRAD comes before 3B0"));
}

TEST_CASE("validate: REDUCE_GRAD before the stage's last W is refused (zb-h1, zbv)") {
  for (const ScheduleParams& params :
       {ScheduleParams{ScheduleKind::ZBH1, 3, 1, 6, 0}, ScheduleParams{ScheduleKind::ZBV, 3, 2, 6, 0}}) {
    CAPTURE(config::to_string(params.kind));
    const Program program = add_gradient_reduction(generate(params));
    for (int64_t s = 0; s < program.num_stages; ++s) {
      CAPTURE(s);
      const Action w = last_of(program, s, ActionKind::W);
      const std::string message = error_of(moved_before(program, s, w));
      CHECK_THAT(message, ContainsSubstring("(rule: REDUCE_GRAD after every B, I and W of its stage)"));
      CHECK_THAT(message, ContainsSubstring(to_string(Action{ActionKind::REDUCE_GRAD, s, 0}) +
                                            " comes before " + to_string(w)));
    }
  }
}

TEST_CASE("validate: a duplicated REDUCE_GRAD, one on the wrong rank or with a microbatch is refused") {
  const Program program = add_gradient_reduction(generate(ScheduleKind::OneFOneB, 2, 2));
  Program twice = program;
  twice.ranks[1].push_back(parse_action("1REDUCE_GRAD"));
  const std::string duplicate = error_of(twice);
  CHECK_THAT(duplicate, ContainsSubstring("(rule: at most one REDUCE_GRAD per stage)"));
  CHECK_THAT(duplicate, ContainsSubstring("1REDUCE_GRAD appears again on rank 1, first at position 8"));
  CHECK_THAT(duplicate, ContainsSubstring("1REDUCE_GRAD [1REDUCE_GRAD]"));

  Program wrong_rank = program;
  wrong_rank.ranks[1].pop_back();
  wrong_rank.ranks[0].push_back(parse_action("1REDUCE_GRAD"));
  const std::string rank = error_of(wrong_rank);
  CHECK_THAT(rank, ContainsSubstring("(rule: action on the rank of its stage)"));
  CHECK_THAT(rank, ContainsSubstring("1REDUCE_GRAD is on rank 0 but stage 1 runs on rank 1"));
  CHECK_THAT(rank, ContainsSubstring("rank 0: 0F0 0SEND_F0 0RECV_B0 0F1 0SEND_F1 0RECV_B1 0B0 0B1 "
                                     "0REDUCE_GRAD [1REDUCE_GRAD]"));

  Program with_microbatch = program;
  with_microbatch.ranks[0].back().microbatch = 1;
  CHECK_THAT(error_of(with_microbatch),
             ContainsSubstring("(rule: stage and microbatch in range)") &&
                 ContainsSubstring("0REDUCE_GRAD has microbatch 1"));
}

TEST_CASE("job_program: REDUCE_GRAD per stage with runtime.overlap_grad_reduce, for custom CSVs too") {
  auto spec = test::memory_test_spec();
  spec.pipeline.schedule = ScheduleKind::OneFOneB;
  spec.pipeline.stages = 2;
  spec.pipeline.microbatches = 2;
  CHECK(job_program(spec).ranks[1].back() == parse_action("1REDUCE_GRAD"));
  spec.runtime.overlap_grad_reduce = false;
  CHECK(job_program(spec).ranks == generate(ScheduleKind::OneFOneB, 2, 2).ranks);

  spec.pipeline.schedule = ScheduleKind::Custom;
  spec.pipeline.schedule_file = "custom.csv";
  const std::string csv = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n";
  CHECK(format_rank(job_program(spec, &csv).ranks[0], false) ==
        "0F0 0SEND_F0 0RECV_B0 0F1 0SEND_F1 0RECV_B1 0B0 0B1");
  spec.runtime.overlap_grad_reduce = true;
  CHECK(format_rank(job_program(spec, &csv).ranks[0], false) ==
        "0F0 0SEND_F0 0RECV_B0 0F1 0SEND_F1 0RECV_B1 0B0 0B1 0REDUCE_GRAD");
  const std::string with_reduce = "0F0,0F1,0B0,0B1,0REDUCE_GRAD\n1F0,1B0,1F1,1B1\n";
  CHECK_THROWS_WITH(job_program(spec, &with_reduce),
                    ContainsSubstring("custom.csv: line 1, row 1 (rank 0), column 5: 0REDUCE_GRAD is "
                                      "a gradient reduction action") &&
                        ContainsSubstring("runtime.overlap_grad_reduce"));
}

TEST_CASE("simulate: with grad_reduce = 0 the step is unchanged, and every stage is reduced once") {
  for (const ScheduleParams& params : family_grid()) {
    CAPTURE(config::to_string(params.kind), params.ranks, params.virtual_stages, params.microbatches);
    const Program after = generate(params);
    const Simulation plain = simulate(after, costs_with(0.0));
    const Simulation reduced = simulate(add_gradient_reduction(after), costs_with(0.0));
    CHECK(reduced.step_time == plain.step_time);
    CHECK(reduced.bubble_fraction == plain.bubble_fraction);
    for (const Simulation* sim : {&plain, &reduced}) {
      REQUIRE(sim->reductions.size() == static_cast<size_t>(after.num_ranks()));
      std::vector<int64_t> stages;
      for (size_t r = 0; r < sim->reductions.size(); ++r)
        for (const TimedReduction& t : sim->reductions[r]) {
          CHECK(after.stage_to_rank[static_cast<size_t>(t.stage)] == static_cast<int64_t>(r));
          CHECK(t.start == t.end);
          stages.push_back(t.stage);
        }
      std::sort(stages.begin(), stages.end());
      std::vector<int64_t> all(static_cast<size_t>(after.num_stages));
      for (size_t s = 0; s < all.size(); ++s) all[s] = static_cast<int64_t>(s);
      CHECK(stages == all);
    }
  }
}

TEST_CASE("simulate: 1F1B p=4, m=8, the reduction extends rank 0's step, hides in the last rank's idle") {
  const double g = 1.5;
  const Program program = add_gradient_reduction(generate(ScheduleKind::OneFOneB, 4, 8));
  const Simulation base = simulate(program, costs_with(0.0));
  const Simulation sim = simulate(program, costs_with(g));
  REQUIRE(base.step_time == 33.0);  // (m + p - 1)(F + B)
  // Stage 0's last backward ends the step: its reduction adds exactly g.
  REQUIRE(sim.reductions[0].size() == 1);
  CHECK(sim.reductions[0][0].stage == 0);
  CHECK(sim.reductions[0][0].start == 33.0);
  CHECK(sim.reductions[0][0].end == 33.0 + g);
  CHECK(sim.step_time == 33.0 + g);
  // The last rank's last B ends 3 B's earlier; its reduction runs while it waits for the step's end.
  REQUIRE(sim.reductions[3].size() == 1);
  CHECK(sim.reductions[3][0].start == sim.timeline[3].back().end);
  CHECK(sim.reductions[3][0].start == 27.0);
  CHECK(sim.reductions[3][0].end <= base.step_time);
  // Compute does not move; the bubble is idle compute over the longer step.
  for (size_t r = 0; r < 4; ++r) {
    CHECK(sim.busy_time[r] == base.busy_time[r]);
    CHECK(sim.bubble_fraction[r] == 1.0 - sim.busy_time[r] / sim.step_time);
    for (size_t i = 0; i < sim.timeline[r].size(); ++i)
      CHECK(sim.timeline[r][i].end == base.timeline[r][i].end);
  }
}

TEST_CASE("simulate: one collective at a time per rank; stages without REDUCE_GRAD reduced after") {
  // F=1, B=2, g=5: 1B0 ends at 4, so 1REDUCE_GRAD runs 4..9; 0B0 ends at 6, and 0REDUCE_GRAD waits
  // for the rank's previous reduction: 9..14.
  const Program both = hand_made(1, {0, 0}, {"0F0 1F0 1B0 1REDUCE_GRAD 0B0 0REDUCE_GRAD"});
  const Simulation sim = simulate(both, costs_with(5.0));
  REQUIRE(sim.reductions[0].size() == 2);
  CHECK(sim.reductions[0][0].stage == 1);
  CHECK(sim.reductions[0][0].start == 4.0);
  CHECK(sim.reductions[0][0].end == 9.0);
  CHECK(sim.reductions[0][1].stage == 0);
  CHECK(sim.reductions[0][1].start == 9.0);
  CHECK(sim.reductions[0][1].end == 14.0);
  CHECK(sim.step_time == 14.0);
  CHECK(sim.bubble_fraction[0] == 1.0 - 6.0 / 14.0);
  // Without 0REDUCE_GRAD stage 0 is reduced after the rank's last action, after stage 1's too.
  const Simulation mixed =
      simulate(hand_made(1, {0, 0}, {"0F0 1F0 1B0 1REDUCE_GRAD 0B0"}), costs_with(5.0));
  CHECK(mixed.reductions[0].back().stage == 0);
  CHECK(mixed.reductions[0].back().start == 9.0);
  // Without any: both after the schedule, one after another from 6.
  const Simulation after = simulate(hand_made(1, {0, 0}, {"0F0 1F0 1B0 0B0"}), costs_with(5.0));
  REQUIRE(after.reductions[0].size() == 2);
  CHECK(after.reductions[0][0].start == 6.0);
  CHECK(after.reductions[0][1].start == 11.0);
  CHECK(after.step_time == 16.0);
}

TEST_CASE("simulate: reducing after the schedule is never faster than from REDUCE_GRAD") {
  for (const double g : {0.5, 3.0, 20.0})
    for (const ScheduleParams& params : family_grid()) {
      CAPTURE(g, config::to_string(params.kind), params.ranks, params.virtual_stages,
              params.microbatches);
      const Program after = generate(params);
      const double overlapped = simulate(add_gradient_reduction(after), costs_with(g)).step_time;
      const double at_end = simulate(after, costs_with(g)).step_time;
      CHECK(overlapped <= at_end);
      // With several stages per rank, the later stages' reductions hide under the first stage's
      // remaining backward work, when that lasts at least g.
      if (params.virtual_stages > 1 && params.ranks > 1 && params.microbatches >= params.ranks &&
          g == 0.5)
        CHECK(overlapped < at_end);
    }
}

TEST_CASE("simulate: grad_reduce must be finite and non-negative") {
  const Program program = generate(ScheduleKind::OneFOneB, 2, 2);
  CHECK_THROWS_WITH(simulate(program, costs_with(-1.0)), ContainsSubstring("grad_reduce is -1"));
  CHECK_THROWS_AS(simulate(program, costs_with(std::numeric_limits<double>::infinity())),
                  ScheduleError);
  CHECK_THROWS_WITH(simulate(hand_made(1, {0}, {"0F0 0B0 1REDUCE_GRAD"}), costs_with(1.0)),
                    ContainsSubstring("1REDUCE_GRAD on rank 0 is outside 1 stages"));
}

TEST_CASE("format_timeline and to_chrome_trace show the reductions beside the compute") {
  const Program program = add_gradient_reduction(
      hand_made(2, {0, 1}, {"0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"}));
  const Simulation sim = simulate(program, costs_with(2.0));
  CHECK(format_timeline(sim, 11) ==
        "rank 0 |FF..BB.BB..|\n"
        "       |.........RR|\n"
        "rank 1 |.FBBFBB....|\n"
        "       |.......RR..|\n"
        "        0     11 ms  (1 column = 1 ms; F forward, B backward, I input grad, W weight grad, "
        ". idle; R gradient reduction, on the line under its rank)\n");

  const nlohmann::json trace = nlohmann::json::parse(to_chrome_trace(sim));
  std::vector<std::string> threads;
  int reductions = 0;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "thread_name")
      threads.push_back(std::to_string(event["tid"].get<int>()) + ":" +
                        event["args"]["name"].get<std::string>());
    if (event["cat"] == "REDUCE_GRAD") {
      ++reductions;
      CHECK(event["ph"] == "X");
      CHECK(event["dur"].get<double>() == 2000.0);
      if (event["name"] == "1REDUCE_GRAD") {
        CHECK(event["tid"] == 3);
        CHECK(event["ts"].get<double>() == 7000.0);
        CHECK(event["args"]["stage"] == 1);
      }
    }
  }
  CHECK(reductions == 2);
  CHECK(threads == std::vector<std::string>{"0:rank 0", "1:rank 1", "2:rank 0 collectives",
                                            "3:rank 1 collectives"});
  // Not modelled (grad_reduce = 0): neither the lines nor the tracks.
  const Simulation plain = simulate(program, costs_with(0.0));
  CHECK_THAT(format_timeline(plain, 9), !ContainsSubstring("R gradient reduction"));
  CHECK_THAT(to_chrome_trace(plain), !ContainsSubstring("collectives"));
}

TEST_CASE("stage_cost_model: per-layer times to stage costs, with the latency and reduction given") {
  plan::LayerTimes times;
  times.blocks = {{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}};
  times.embedding = {0.5, 0.5};
  times.head = {2.0, 2.0};
  const CostModel costs = stage_cost_model({{0, 1}, {1, 3}}, times, 0.25, 7.5);
  REQUIRE(costs.stages.size() == 2);
  CHECK(costs.stages[0].forward == 1.5);    // embedding + block 0
  CHECK(costs.stages[1].backward == 12.0);  // blocks 1, 2 + head
  CHECK(costs.stages[1].input_grad == 6.0);
  CHECK(costs.stages[1].weight_grad == 6.0);
  CHECK(costs.p2p_latency == 0.25);
  CHECK(costs.grad_reduce == 7.5);
  CHECK(stage_cost_model({{0, 3}}, times).grad_reduce == 0.0);
}
