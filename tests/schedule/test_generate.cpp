// Tests of the generators (GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZBV), their parameter rules and
// add_communication: goldens, and properties over a grid of p, m and v.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "plan/layout.hpp"
#include "schedule/action.hpp"
#include "schedule/generate.hpp"
#include "schedule/generators.hpp"
#include "schedule/simulate.hpp"
#include "schedule/validate.hpp"

using namespace ppctl;
using namespace ppctl::schedule;
using Catch::Matchers::ContainsSubstring;
using config::ScheduleKind;

namespace {

constexpr ScheduleKind kKinds[] = {ScheduleKind::GPipe, ScheduleKind::OneFOneB};

const char* name(ScheduleKind kind) { return kind == ScheduleKind::GPipe ? "gpipe" : "1f1b"; }

/// Index of `action` in `program`, or -1.
int64_t find(const RankProgram& program, const Action& action) {
  const auto it = std::find(program.begin(), program.end(), action);
  return it == program.end() ? -1 : static_cast<int64_t>(it - program.begin());
}

/// Number of Fs before the first B or I (the rank's first backward).
int64_t leading_forwards(const RankProgram& program) {
  int64_t count = 0;
  for (const Action& a : program) {
    if (a.kind == ActionKind::B || a.kind == ActionKind::I) break;
    if (a.kind == ActionKind::F) ++count;
  }
  return count;
}

/// Largest (F done - B done) over the rank's program.
int64_t max_in_flight(const RankProgram& program) {
  int64_t now = 0;
  int64_t most = 0;
  for (const Action& a : program) {
    if (a.kind == ActionKind::F) ++now;
    if (a.kind == ActionKind::B) --now;
    most = std::max(most, now);
  }
  return most;
}

/// Compute actions only, in order.
RankProgram compute_of(const RankProgram& program) {
  RankProgram out;
  for (const Action& a : program)
    if (is_compute(a.kind)) out.push_back(a);
  return out;
}

}  // namespace

TEST_CASE("warmup_microbatches: GPipe m, 1F1B min(p - rank - 1, m)") {
  for (int64_t rank = 0; rank < 4; ++rank)
    CHECK(warmup_microbatches(ScheduleKind::GPipe, 4, 8, rank) == 8);
  const int64_t p4m8[] = {3, 2, 1, 0};
  const int64_t p4m2[] = {2, 2, 1, 0};
  for (int64_t rank = 0; rank < 4; ++rank) {
    CHECK(warmup_microbatches(ScheduleKind::OneFOneB, 4, 8, rank) == p4m8[rank]);
    CHECK(warmup_microbatches(ScheduleKind::OneFOneB, 4, 2, rank) == p4m2[rank]);
  }
  CHECK(warmup_microbatches(ScheduleKind::OneFOneB, 1, 5, 0) == 0);
  REQUIRE_THROWS_AS(warmup_microbatches(ScheduleKind::OneFOneB, 4, 8, 4), ScheduleError);
  REQUIRE_THROWS_AS(warmup_microbatches(ScheduleKind::OneFOneB, 4, 0, 0), ScheduleError);
}

TEST_CASE("1F1B golden: p=4, m=8 (Megatron-LM non-interleaved loops, derived by hand)") {
  // Rank r: F0..F(w-1) with w = 3 - r, then pairs F(w+i) B(i), then the remaining Bs.
  const char* expected[] = {
      "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7",
      "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7",
      "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7",
      "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7",
  };
  const Program compute = generate_compute(ScheduleKind::OneFOneB, 4, 8);
  const Program full = generate(ScheduleKind::OneFOneB, 4, 8);
  REQUIRE(compute.num_ranks() == 4);
  for (size_t r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(format_rank(compute.ranks[r], true) == expected[r]);
    CHECK(format_rank(full.ranks[r], true) == expected[r]);
  }
}

TEST_CASE("GPipe golden: p=2, m=3") {
  const Program compute = generate_compute(ScheduleKind::GPipe, 2, 3);
  CHECK(format_rank(compute.ranks[0], false) == "0F0 0F1 0F2 0B0 0B1 0B2");
  CHECK(format_rank(compute.ranks[1], false) == "1F0 1F1 1F2 1B0 1B1 1B2");
}

TEST_CASE("add_communication golden: p=2, m=2 1F1B, receives one compute action early") {
  const Program program = generate(ScheduleKind::OneFOneB, 2, 2);
  REQUIRE(program.num_ranks() == 2);
  CHECK(format_rank(program.ranks[0], false) ==
        "0F0 0SEND_F0 0RECV_B0 0F1 0SEND_F1 0RECV_B1 0B0 0B1");
  CHECK(format_rank(program.ranks[1], false) ==
        "1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1");
}

TEST_CASE("add_communication: stages on one rank exchange locally (virtual stages)") {
  Program compute;
  compute.num_stages = 4;
  compute.num_microbatches = 1;
  compute.stage_to_rank = {0, 0, 1, 1};
  compute.ranks = {parse_rank("0F0 1F0 1B0 0B0"), parse_rank("2F0 3F0 3B0 2B0")};
  const Program program = add_communication(compute);
  CHECK(format_rank(program.ranks[0], false) == "0F0 1RECV_B0 1F0 1SEND_F0 1B0 0B0");
  CHECK(format_rank(program.ranks[1], false) == "2RECV_F0 2F0 3F0 3B0 2B0 2SEND_B0");
  CHECK_NOTHROW(validate(program));

  Program interleaved = compute;
  interleaved.stage_to_rank = {0, 1, 0, 1};
  interleaved.ranks = {parse_rank("0F0 2F0 2B0 0B0"), parse_rank("1F0 3F0 3B0 1B0")};
  const Program with_comm = add_communication(interleaved);
  CHECK(format_rank(with_comm.ranks[0], false) ==
        "2RECV_F0 0F0 0SEND_F0 2RECV_B0 2F0 2SEND_F0 0RECV_B0 2B0 2SEND_B0 0B0");
  CHECK(format_rank(with_comm.ranks[1], false) ==
        "1RECV_F0 3RECV_F0 1F0 1SEND_F0 3F0 1RECV_B0 3B0 3SEND_B0 1B0 1SEND_B0");
  CHECK_NOTHROW(validate(with_comm));
}

TEST_CASE("add_communication rejects a program that already communicates") {
  const Program program = generate(ScheduleKind::GPipe, 2, 2);
  REQUIRE_THROWS_AS(add_communication(program), ScheduleError);
  REQUIRE_THROWS_WITH(add_communication(program), ContainsSubstring("SEND_F"));
}

TEST_CASE("generators reject an empty pipeline or step") {
  for (ScheduleKind kind : kKinds) {
    REQUIRE_THROWS_AS(generate_compute(kind, 0, 4), ScheduleError);
    REQUIRE_THROWS_AS(generate_compute(kind, 4, 0), ScheduleError);
  }
}

TEST_CASE("GPipe and 1F1B properties for p in 1..8, m in 1..16") {
  for (ScheduleKind kind : kKinds) {
    for (int64_t p = 1; p <= 8; ++p) {
      for (int64_t m = 1; m <= 16; ++m) {
        CAPTURE(name(kind), p, m);
        const Program program = generate(kind, p, m);
        REQUIRE(program.num_stages == p);
        REQUIRE(program.num_microbatches == m);
        REQUIRE(program.num_ranks() == p);
        for (int64_t s = 0; s < p; ++s) REQUIRE(program.stage_to_rank[static_cast<size_t>(s)] == s);

        for (int64_t r = 0; r < p; ++r) {
          CAPTURE(r);
          const RankProgram& actions = program.ranks[static_cast<size_t>(r)];
          const RankProgram compute = compute_of(actions);
          // Every F(r,j) and B(r,j) exactly once, nothing else; F before B; microbatches in order.
          REQUIRE(static_cast<int64_t>(compute.size()) == 2 * m);
          int64_t next_f = 0;
          int64_t next_b = 0;
          for (const Action& a : compute) {
            REQUIRE(a.stage == r);
            if (a.kind == ActionKind::F) {
              REQUIRE(a.microbatch == next_f++);
            } else {
              REQUIRE(a.kind == ActionKind::B);
              REQUIRE(a.microbatch == next_b++);
              REQUIRE(next_b <= next_f);  // B(j) after F(j)
            }
          }
          REQUIRE(next_f == m);
          REQUIRE(next_b == m);

          // Warmup: the stated number of forwards run before the steady phase. In 1F1B the steady
          // phase opens with one more forward, so the first B follows min(w + 1, m) forwards.
          const int64_t warmup = warmup_microbatches(kind, p, m, r);
          if (kind == ScheduleKind::GPipe) {
            CHECK(warmup == m);
            CHECK(leading_forwards(compute) == m);
            CHECK(max_in_flight(compute) == m);
          } else {
            CHECK(warmup == std::min(p - r - 1, m));
            CHECK(leading_forwards(compute) == std::min(warmup + 1, m));
            // 1F1B bounds the activations kept alive: at most min(p - r, m), and it reaches that.
            CHECK(max_in_flight(compute) == std::min(p - r, m));
            // After warmup the rank alternates F, B until its forwards run out, then only Bs.
            for (size_t i = static_cast<size_t>(warmup); i < compute.size(); ++i) {
              const size_t steady = i - static_cast<size_t>(warmup);
              const bool in_steady = steady < 2 * static_cast<size_t>(m - warmup);
              const ActionKind want = in_steady && steady % 2 == 0 ? ActionKind::F : ActionKind::B;
              REQUIRE(compute[i].kind == want);
            }
          }

          // Transfers: each has its partner on the neighbour's rank; each sits next to its compute.
          for (size_t i = 0; i < actions.size(); ++i) {
            const Action& a = actions[i];
            if (is_compute(a.kind)) continue;
            Action partner = a;
            int64_t peer = 0;
            switch (a.kind) {
              case ActionKind::SEND_F:
                partner = {ActionKind::RECV_F, a.stage + 1, a.microbatch};
                peer = r + 1;
                break;
              case ActionKind::RECV_F:
                partner = {ActionKind::SEND_F, a.stage - 1, a.microbatch};
                peer = r - 1;
                break;
              case ActionKind::SEND_B:
                partner = {ActionKind::RECV_B, a.stage - 1, a.microbatch};
                peer = r - 1;
                break;
              default:
                partner = {ActionKind::SEND_B, a.stage + 1, a.microbatch};
                peer = r + 1;
                break;
            }
            CAPTURE(to_string(a));
            REQUIRE(peer >= 0);
            REQUIRE(peer < p);
            REQUIRE(std::count(actions.begin(), actions.end(), a) == 1);
            REQUIRE(find(program.ranks[static_cast<size_t>(peer)], partner) >= 0);
            const Action producer_or_consumer{
                a.kind == ActionKind::SEND_F || a.kind == ActionKind::RECV_F ? ActionKind::F
                                                                             : ActionKind::B,
                a.stage, a.microbatch};
            const int64_t compute_at = find(actions, producer_or_consumer);
            REQUIRE(compute_at >= 0);
            if (is_send(a.kind)) {
              REQUIRE(compute_at == static_cast<int64_t>(i) - 1);  // right after its compute
            } else {
              // Before its consumer, with exactly one compute action in between (or none if first).
              const int64_t position = find(compute, producer_or_consumer);
              int64_t computes_between = 0;
              for (int64_t k = static_cast<int64_t>(i) + 1; k < compute_at; ++k)
                computes_between += is_compute(actions[static_cast<size_t>(k)].kind) ? 1 : 0;
              REQUIRE(computes_between == std::min<int64_t>(position, 1));
            }
          }
          // Every cross-rank input is received and every cross-rank output is sent.
          int64_t recvs = 0;
          int64_t sends = 0;
          for (const Action& a : actions) {
            recvs += is_recv(a.kind) ? 1 : 0;
            sends += is_send(a.kind) ? 1 : 0;
          }
          const int64_t neighbours = (r > 0 ? 1 : 0) + (r + 1 < p ? 1 : 0);
          REQUIRE(recvs == neighbours * m);
          REQUIRE(sends == neighbours * m);
        }
        REQUIRE_NOTHROW(validate(program));
      }
    }
  }
}

TEST_CASE("large pipelines generate and validate: p=64, m=256") {
  for (ScheduleKind kind : kKinds) {
    CAPTURE(name(kind));
    const Program program = generate(kind, 64, 256);
    REQUIRE(program.num_ranks() == 64);
    REQUIRE_NOTHROW(validate(program));
  }
}

// ------------------------------------------------------------------------------------------------
// Every generated kind: interleaved 1F1B, ZB-H1 and ZBV next to GPipe and 1F1B.

namespace {

constexpr ScheduleKind kGenerated[] = {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                                       ScheduleKind::Interleaved1F1B, ScheduleKind::ZBH1,
                                       ScheduleKind::ZBV};

/// The message check_params throws for `params`, or "" when it accepts them.
std::string rejection(const ScheduleParams& params) {
  try {
    check_params(params);
  } catch (const ScheduleError& e) {
    return e.what();
  }
  return {};
}

/// The rules generate.hpp states for check_params, written out independently of generate.cpp.
bool allowed(const ScheduleParams& params) {
  const int64_t p = params.ranks;
  const int64_t v = params.virtual_stages;
  const int64_t m = params.microbatches;
  if (p < 1 || m < 1) return false;
  switch (params.kind) {
    case ScheduleKind::ZBV:
      return v == 2;
    case ScheduleKind::Interleaved1F1B: {
      const int64_t g = params.group_size == 0 ? p : params.group_size;
      return v >= 2 && params.group_size >= 0 && g >= p && (m <= g || m % g == 0 || m % g >= p);
    }
    case ScheduleKind::Custom:
      return false;
    default:
      return v == 1;
  }
}

/// Checks what every generated compute-only program must satisfy, beyond validate(): the placement
/// of its kind, each (s,j) with one F and one B or one I and one W, W after I, and the stated
/// warmup.
void check_generated(const ScheduleParams& params, const Program& compute) {
  const int64_t p = params.ranks;
  const int64_t v = params.virtual_stages;
  const int64_t m = params.microbatches;
  REQUIRE(compute.num_ranks() == p);
  REQUIRE(compute.num_stages == p * v);
  REQUIRE(compute.num_microbatches == m);
  REQUIRE(compute.stage_to_rank == plan::place_stages(p, v, plan::default_placement(params.kind)));
  const bool split = params.kind == ScheduleKind::ZBH1 || params.kind == ScheduleKind::ZBV;
  std::map<std::pair<int, std::pair<int64_t, int64_t>>, int> count;  // (kind, (s, j)) -> times
  for (int64_t r = 0; r < p; ++r) {
    CAPTURE(r);
    const RankProgram& actions = compute.ranks[static_cast<size_t>(r)];
    for (const Action& a : actions) {
      REQUIRE(is_compute(a.kind));
      REQUIRE(compute.stage_to_rank[static_cast<size_t>(a.stage)] == r);
      // Split kinds run I and W, never B; the others B, never I or W.
      REQUIRE(a.kind != (split ? ActionKind::B : ActionKind::I));
      if (!split) REQUIRE(a.kind != ActionKind::W);
      ++count[{static_cast<int>(a.kind), {a.stage, a.microbatch}}];
      if (a.kind == ActionKind::W) {
        // W after its I on the same rank.
        const auto w = std::find(actions.begin(), actions.end(), a);
        REQUIRE(std::find(actions.begin(), w, Action{ActionKind::I, a.stage, a.microbatch}) != w);
      }
    }
    // The first backward follows min(w + 1, the rank's forwards) forwards.
    const int64_t forwards = m * v;
    CHECK(leading_forwards(actions) == std::min(warmup_microbatches(params, r) + 1, forwards));
  }
  for (int64_t s = 0; s < p * v; ++s)
    for (int64_t j = 0; j < m; ++j) {
      CAPTURE(s, j);
      const auto times = [&](ActionKind kind) {
        const auto it = count.find({static_cast<int>(kind), {s, j}});
        return it == count.end() ? 0 : it->second;
      };
      REQUIRE(times(ActionKind::F) == 1);
      if (split) {
        REQUIRE(times(ActionKind::I) == 1);
        REQUIRE(times(ActionKind::W) == 1);
      } else {
        REQUIRE(times(ActionKind::B) == 1);
      }
    }
}

/// Mean idle time per rank of a simulated program (step time x mean bubble fraction), in ms.
double mean_idle(const Program& program, const StageCosts& per_stage) {
  CostModel costs;
  costs.stages = {per_stage};
  const Simulation sim = simulate(program, costs);
  return sim.step_time * sim.mean_bubble_fraction;
}

}  // namespace

TEST_CASE(
    "every generated kind: check_params or validate() for p in 1..8, m in 1..16, v in 1,2,4") {
  int64_t accepted = 0;
  int64_t rejected = 0;
  for (ScheduleKind kind : kGenerated)
    for (int64_t p = 1; p <= 8; ++p)
      for (int64_t m = 1; m <= 16; ++m)
        for (int64_t v : {1, 2, 4})
          for (int64_t g : {int64_t{0}, p + 1, 2 * p + 1, m}) {
            if (g != 0 && kind != ScheduleKind::Interleaved1F1B) continue;
            const ScheduleParams params{kind, p, v, m, g};
            CAPTURE(config::to_string(kind), p, m, v, g);
            const std::string why = rejection(params);
            REQUIRE(why.empty() == allowed(params));
            if (!why.empty()) {
              // The rule is stated, with the spec fields to change.
              CHECK_THAT(why, ContainsSubstring("pipeline."));
              CHECK_THAT(why, ContainsSubstring("(fix: "));
              REQUIRE_THROWS_AS(generate(params), ScheduleError);
              ++rejected;
              continue;
            }
            const Program compute = generate_compute(params);
            check_generated(params, compute);
            const Program program = add_communication(compute);
            REQUIRE_NOTHROW(validate(program));
            ++accepted;
          }
  CHECK(accepted > 1000);
  CHECK(rejected > 1000);
}

TEST_CASE("the interleaved group rule suffices: p 1..8, v 2..4, m 1..24, every allowed g") {
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t v = 2; v <= 4; ++v)
      for (int64_t m = 1; m <= 24; ++m)
        for (int64_t g = p; g <= m + 1; ++g) {
          const ScheduleParams params{ScheduleKind::Interleaved1F1B, p, v, m, g};
          if (!allowed(params)) continue;
          CAPTURE(p, v, m, g);
          REQUIRE_NOTHROW(validate(generate(params)));
        }
}

TEST_CASE("the interleaved group rule is needed: what it rejects can deadlock") {
  // Built with the generator directly, past check_params.
  struct Case {
    int64_t p, v, m, g;
  };
  for (const Case c : {Case{4, 2, 8, 2}, Case{4, 2, 8, 3}, Case{4, 3, 5, 4}, Case{5, 2, 7, 5}}) {
    CAPTURE(c.p, c.v, c.m, c.g);
    const ScheduleParams params{ScheduleKind::Interleaved1F1B, c.p, c.v, c.m, c.g};
    REQUIRE_FALSE(allowed(params));
    const Program program = add_communication(detail::interleaved_1f1b(params));
    REQUIRE_THROWS_WITH(validate(program), ContainsSubstring("(rule: no deadlock)"));
  }
}

TEST_CASE("check_params states the rule and the nearest valid values") {
  using Catch::Matchers::Equals;
  CHECK_THAT(rejection({ScheduleKind::Interleaved1F1B, 4, 2, 10, 4}),
             Equals("interleaved-1f1b: pipeline.microbatches 10 in groups of 4 "
                    "(pipeline.microbatch_group_size) leaves a last group of 2, fewer than "
                    "pipeline.stages (4): the last group must be full or hold at least one "
                    "microbatch per rank, or the schedule can deadlock (fix: use "
                    "pipeline.microbatches 8 or 12, or pipeline.microbatch_group_size 5)"));
  CHECK_THAT(rejection({ScheduleKind::Interleaved1F1B, 4, 2, 9, 0}),
             ContainsSubstring("in groups of 4 (pipeline.microbatch_group_size 0 = "
                               "pipeline.stages) leaves a last group of 1") &&
                 ContainsSubstring("use pipeline.microbatches 8 or 12, or "
                                   "pipeline.microbatch_group_size 5)"));
  CHECK_THAT(rejection({ScheduleKind::Interleaved1F1B, 4, 2, 22, 7}),
             ContainsSubstring("use pipeline.microbatches 21 or 25, or "
                               "pipeline.microbatch_group_size 6 or 8)"));
  CHECK_THAT(rejection({ScheduleKind::Interleaved1F1B, 4, 2, 8, 3}),
             ContainsSubstring("groups of 3 (pipeline.microbatch_group_size) are smaller than "
                               "pipeline.stages (4)") &&
                 ContainsSubstring("(fix: set pipeline.microbatch_group_size to 4 or more, or 0)"));
  CHECK_THAT(rejection({ScheduleKind::Interleaved1F1B, 4, 1, 8, 0}),
             ContainsSubstring("at least 2 stages per rank, but pipeline.virtual_stages is 1"));
  CHECK_THAT(rejection({ScheduleKind::Interleaved1F1B, 4, 2, 8, -1}),
             ContainsSubstring("pipeline.microbatch_group_size is -1"));
  CHECK_THAT(
      rejection({ScheduleKind::ZBV, 4, 4, 8, 0}),
      ContainsSubstring("zbv places exactly 2 stages on each rank (a V), but "
                        "pipeline.virtual_stages is 4 (fix: set pipeline.virtual_stages: 2)"));
  CHECK_THAT(rejection({ScheduleKind::ZBH1, 4, 2, 8, 0}),
             ContainsSubstring("zb-h1 runs one stage per rank, but pipeline.virtual_stages is 2"));
  CHECK_THAT(rejection({ScheduleKind::Custom, 4, 1, 8, 0}),
             ContainsSubstring("pipeline.schedule_file"));
  CHECK_THAT(rejection({ScheduleKind::Interleaved1F1B, 4, 3, 5, 4}),
             ContainsSubstring("use pipeline.microbatches 4 or 8, or "
                               "pipeline.microbatch_group_size 5)"));
  CHECK(rejection({ScheduleKind::Interleaved1F1B, 4, 2, 10, 5}).empty());
  CHECK(rejection({ScheduleKind::Interleaved1F1B, 4, 2, 3, 0}).empty());   // one group of 3
  CHECK(rejection({ScheduleKind::Interleaved1F1B, 4, 2, 13, 9}).empty());  // last group of 4
}

TEST_CASE("schedule_params reads the spec") {
  config::JobSpec spec;
  spec.pipeline.schedule = ScheduleKind::Interleaved1F1B;
  spec.pipeline.stages = 4;
  spec.pipeline.virtual_stages = 3;
  spec.pipeline.microbatches = 12;
  spec.pipeline.microbatch_group_size = 6;
  const ScheduleParams params = schedule_params(spec);
  CHECK(params.kind == ScheduleKind::Interleaved1F1B);
  CHECK(params.ranks == 4);
  CHECK(params.virtual_stages == 3);
  CHECK(params.microbatches == 12);
  CHECK(params.group_size == 6);
  CHECK(group_size(params) == 6);
  CHECK(group_size({ScheduleKind::Interleaved1F1B, 4, 3, 12, 0}) == 4);
  spec.pipeline.schedule = ScheduleKind::ZBAuto;
  spec.pipeline.zb_auto.weight_grad = {3, 2, 2, 1};
  spec.pipeline.zb_auto.max_in_flight = 5;
  const ScheduleParams zb = schedule_params(spec);
  CHECK(zb.zb_auto.weight_grad == std::vector<double>{3, 2, 2, 1});
  CHECK(zb.zb_auto.max_in_flight == 5);
}

TEST_CASE("interleaved warmup: min(2(p - r - 1) + (v - 1) g, m v) forwards per rank") {
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t v : {2, 3, 4})
      for (int64_t m = 1; m <= 16; ++m)
        for (int64_t g : {int64_t{0}, p + 1}) {
          const ScheduleParams params{ScheduleKind::Interleaved1F1B, p, v, m, g};
          if (!allowed(params)) continue;
          const Program compute = generate_compute(params);
          for (int64_t r = 0; r < p; ++r) {
            CAPTURE(p, v, m, g, r);
            const int64_t w = std::min(2 * (p - r - 1) + (v - 1) * (g == 0 ? p : g), m * v);
            CHECK(warmup_microbatches(params, r) == w);
            CHECK(leading_forwards(compute.ranks[static_cast<size_t>(r)]) ==
                  std::min(w + 1, m * v));
          }
        }
}

TEST_CASE("interleaved golden: p=2, v=2, m=4 (Megatron-core's schedule table, by hand)") {
  // Rank 0 holds stages 0 and 2, rank 1 stages 1 and 3; groups of g = p = 2 microbatches. Rank 0
  // warms up with 2(p-1) + (v-1)g = 4 forwards, rank 1 with 2; backwards start from the last chunk.
  const Program program = generate({ScheduleKind::Interleaved1F1B, 2, 2, 4, 0});
  CHECK(program.stage_to_rank == std::vector<int64_t>{0, 1, 0, 1});
  CHECK(format_rank(program.ranks[0], true) ==
        "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3");
  CHECK(format_rank(program.ranks[1], true) ==
        "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3");
  // p = 2: each rank's next and previous peer are the same rank; every transfer still has its own
  // tag.
  REQUIRE_NOTHROW(validate(program));
  std::map<std::pair<size_t, int64_t>, int> tags;  // (receiving rank, tag) -> receives
  for (size_t r = 0; r < 2; ++r)
    for (const Action& a : program.ranks[r])
      if (is_recv(a.kind)) CHECK(++tags[{r, message_tag(a, 4)}] == 1);
  CHECK(tags.size() == 2 * 3 * 4);  // 3 stage boundaries x 4 microbatches x 2 directions
}

TEST_CASE("ZB-H1 golden: p=3, m=4 (1F1B order, rank r keeps up to r weight gradients pending)") {
  const Program compute = generate_compute({ScheduleKind::ZBH1, 3, 1, 4, 0});
  CHECK(format_rank(compute.ranks[0], true) == "F0 F1 F2 I0 W0 F3 I1 W1 I2 W2 I3 W3");
  CHECK(format_rank(compute.ranks[1], true) == "F0 F1 I0 F2 I1 W0 F3 I2 W1 I3 W2 W3");
  CHECK(format_rank(compute.ranks[2], true) == "F0 I0 F1 I1 F2 I2 W0 F3 I3 W1 W2 W3");
}

TEST_CASE("ZB-H1: the order of F and I is 1F1B's; activations held stay within 1F1B's peak") {
  for (int64_t p = 1; p <= 8; ++p)
    for (int64_t m = 1; m <= 16; ++m) {
      const Program zb = generate_compute({ScheduleKind::ZBH1, p, 1, m, 0});
      const Program one = generate_compute(ScheduleKind::OneFOneB, p, m);
      for (int64_t r = 0; r < p; ++r) {
        CAPTURE(p, m, r);
        const RankProgram& actions = zb.ranks[static_cast<size_t>(r)];
        RankProgram as_1f1b;
        int64_t held = 0;  // forwards whose W has not run
        int64_t most = 0;
        int64_t pending_w = 0;
        for (const Action& a : actions) {
          if (a.kind == ActionKind::I) as_1f1b.push_back({ActionKind::B, a.stage, a.microbatch});
          if (a.kind == ActionKind::F) as_1f1b.push_back(a);
          held += a.kind == ActionKind::F ? 1 : a.kind == ActionKind::W ? -1 : 0;
          pending_w += a.kind == ActionKind::I ? 1 : a.kind == ActionKind::W ? -1 : 0;
          most = std::max(most, held);
          // Between actions, never more than r weight gradients wait (W follows I at once if over).
          if (a.kind != ActionKind::I) CHECK(pending_w <= r);
        }
        CHECK(as_1f1b == one.ranks[static_cast<size_t>(r)]);
        CHECK(most <= std::min(p, m));  // 1F1B's peak is min(p, m), on rank 0
      }
    }
}

TEST_CASE("ZBV: V placement, rank r holds stages r and 2p-1-r; golden p=2, m=4") {
  for (int64_t p = 1; p <= 8; ++p) {
    const Program program = generate_compute({ScheduleKind::ZBV, p, 2, 2 * p, 0});
    for (int64_t r = 0; r < p; ++r) {
      CHECK(program.stage_to_rank[static_cast<size_t>(r)] == r);
      CHECK(program.stage_to_rank[static_cast<size_t>(2 * p - 1 - r)] == r);
    }
  }
  // Phases of torch.distributed.pipelining's ScheduleZBVZeroBubble (n = max(m, 2p - 1) = 4).
  const Program program = generate_compute({ScheduleKind::ZBV, 2, 2, 4, 0});
  CHECK(format_rank(program.ranks[0], false) ==
        "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 0I2 0W2 "
        "0I3 0W3");
  CHECK(format_rank(program.ranks[1], false) ==
        "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 2I3 1I3 1W2 "
        "2W3 1W3");
}

TEST_CASE("the old (kind, stages, m) overloads serve one-stage-per-rank kinds only") {
  CHECK(format_rank(generate_compute(ScheduleKind::ZBH1, 2, 2).ranks[1], true) ==
        "F0 I0 F1 I1 W0 W1");
  CHECK(warmup_microbatches(ScheduleKind::ZBH1, 4, 8, 1) == 2);
  REQUIRE_THROWS_WITH(warmup_microbatches(ScheduleKind::Interleaved1F1B, 4, 8, 0),
                      ContainsSubstring("warmup_microbatches(schedule_params(spec), rank)"));
  REQUIRE_THROWS_AS(generate_compute(ScheduleKind::ZBV, 2, 4), ScheduleError);
  REQUIRE_THROWS_AS(generate(ScheduleKind::Custom, 2, 4), ScheduleError);
}

TEST_CASE("simulated bubble, uniform costs: interleaved = 1F1B / v, ZB-H1 = 1F1B / 3") {
  // Idle time per rank (step time x mean bubble fraction), not the fraction: the fraction also
  // shrinks the step it divides by. With zero p2p latency the closed forms are exact: 1F1B idles
  // (p-1)(F+B) per rank; interleaved with chunks of 1/v of a rank's layers (F/v, B/v per stage)
  // (p-1)(F+B)/v (arXiv 2104.04473 §2.2, m a multiple of p); ZB-H1 with F = I = W = 1
  // (p-1)(F+I-W) = (p-1) against 1F1B's (p-1)(F+I+W) = 3(p-1) (arXiv 2401.10241 §3.1). Sums of
  // binary fractions, so the only tolerance needed is rounding: 1e-9 relative.
  const StageCosts one_f_one_b{1.0, 2.0, 1.0, 1.0};
  for (int64_t p : {2, 3, 4, 8})
    for (int64_t m : {p, 2 * p, 4 * p}) {
      CAPTURE(p, m);
      const double base = mean_idle(generate(ScheduleKind::OneFOneB, p, m), one_f_one_b);
      CHECK_THAT(base, Catch::Matchers::WithinRel(3.0 * static_cast<double>(p - 1), 1e-9));
      for (int64_t v : {2, 4}) {
        CAPTURE(v);
        const double scale = 1.0 / static_cast<double>(v);
        const double interleaved = mean_idle(generate({ScheduleKind::Interleaved1F1B, p, v, m, 0}),
                                             {scale, 2.0 * scale, scale, scale});
        CHECK_THAT(interleaved, Catch::Matchers::WithinRel(base / static_cast<double>(v), 1e-9));
      }
      const double zb = mean_idle(generate({ScheduleKind::ZBH1, p, 1, m, 0}), one_f_one_b);
      CHECK_THAT(zb, Catch::Matchers::WithinRel(base / 3.0, 1e-9));
    }
}

TEST_CASE("simulated bubble: ZBV with m >= 2p idles a sixth of 1F1B's") {
  // ZBV's stages are half a rank's layers: F = I = W = 0.5 per stage. Its idle time is then
  // (p-1) x 0.5, the warmup of one half-stage forward per rank, against 1F1B's 3(p-1) (measured
  // with this simulator; arXiv 2401.10241 §6 reports near-zero bubbles for m >= 2p).
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {2 * p, 4 * p}) {
      CAPTURE(p, m);
      const double base = mean_idle(generate(ScheduleKind::OneFOneB, p, m), {1, 2, 1, 1});
      const double zbv = mean_idle(generate({ScheduleKind::ZBV, p, 2, m, 0}), {0.5, 1, 0.5, 0.5});
      CHECK_THAT(zbv, Catch::Matchers::WithinRel(base / 6.0, 1e-9));
    }
}

TEST_CASE("large interleaved and zero-bubble pipelines generate and validate: p=32, m=128") {
  for (const ScheduleParams params : {ScheduleParams{ScheduleKind::Interleaved1F1B, 32, 4, 128, 0},
                                      ScheduleParams{ScheduleKind::ZBH1, 32, 1, 128, 0},
                                      ScheduleParams{ScheduleKind::ZBV, 32, 2, 128, 0}}) {
    CAPTURE(config::to_string(params.kind));
    REQUIRE_NOTHROW(validate(generate(params)));
  }
}
