// Tests of REDUCE_GRAD in the schedule IR: add_gradient_reduction's placement (goldens, and every
// generated family over a grid), the validator's rules for it, and job_program.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "schedule/action.hpp"
#include "schedule/generate.hpp"
#include "schedule/job_program.hpp"
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
