// Tests of the GPipe and 1F1B generators and of add_communication, over a grid of p and m.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "schedule/action.hpp"
#include "schedule/generate.hpp"
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

/// Number of Fs before the first B.
int64_t leading_forwards(const RankProgram& program) {
  int64_t count = 0;
  for (const Action& a : program) {
    if (a.kind == ActionKind::B) break;
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
