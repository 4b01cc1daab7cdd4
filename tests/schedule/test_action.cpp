// Tests of the schedule IR: kind predicates, text form and its parser (REDUCE_GRAD's too), transfer
// helpers, message tags.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <set>
#include <string>

#include "core/error.hpp"
#include "schedule/action.hpp"

using namespace ppctl;
using namespace ppctl::schedule;
using Catch::Matchers::ContainsSubstring;

namespace {

struct KindText {
  ActionKind kind;
  const char* text;
  bool compute, send, recv, reduce;
};

constexpr KindText kAllKinds[] = {
    {ActionKind::F, "F", true, false, false, false},
    {ActionKind::B, "B", true, false, false, false},
    {ActionKind::I, "I", true, false, false, false},
    {ActionKind::W, "W", true, false, false, false},
    {ActionKind::SEND_F, "SEND_F", false, true, false, false},
    {ActionKind::RECV_F, "RECV_F", false, false, true, false},
    {ActionKind::SEND_B, "SEND_B", false, true, false, false},
    {ActionKind::RECV_B, "RECV_B", false, false, true, false},
    {ActionKind::REDUCE_GRAD, "REDUCE_GRAD", false, false, false, true},
};

Program on_ranks(int64_t stages, std::vector<int64_t> stage_to_rank) {
  Program program;
  program.num_stages = stages;
  program.num_microbatches = 4;
  program.stage_to_rank = std::move(stage_to_rank);
  return program;
}

}  // namespace

TEST_CASE("kind predicates and names") {
  for (const auto& k : kAllKinds) {
    CAPTURE(k.text);
    CHECK(to_string(k.kind) == k.text);
    CHECK(is_compute(k.kind) == k.compute);
    CHECK(is_send(k.kind) == k.send);
    CHECK(is_recv(k.kind) == k.recv);
    CHECK(is_reduce(k.kind) == k.reduce);
  }
  // The first four kinds are the compute ones (code indexes arrays by them); REDUCE_GRAD came last.
  CHECK(static_cast<int>(ActionKind::W) == 3);
  CHECK(static_cast<int>(ActionKind::REDUCE_GRAD) == static_cast<int>(ActionKind::RECV_B) + 1);
}

TEST_CASE("action text: known forms") {
  CHECK(to_string(Action{ActionKind::F, 1, 3}) == "1F3");
  CHECK(to_string(Action{ActionKind::SEND_B, 0, 2}) == "0SEND_B2");
  CHECK(to_string(Action{ActionKind::RECV_F, 12, 345}) == "12RECV_F345");
  CHECK(parse_action("1F3") == Action{ActionKind::F, 1, 3});
  CHECK(parse_action("0SEND_B2") == Action{ActionKind::SEND_B, 0, 2});
  CHECK(parse_action("63RECV_B255") == Action{ActionKind::RECV_B, 63, 255});
}

TEST_CASE("action text round trip for every kind") {
  for (const auto& k : kAllKinds) {
    if (k.reduce) continue;  // no microbatch: the next test
    for (int64_t stage : {0, 1, 7, 1023}) {
      for (int64_t microbatch : {0, 5, 10, 999999}) {
        const Action action{k.kind, stage, microbatch};
        const std::string text = to_string(action);
        CAPTURE(text);
        CHECK(text == std::to_string(stage) + k.text + std::to_string(microbatch));
        CHECK(parse_action(text) == action);
      }
    }
  }
}

TEST_CASE("REDUCE_GRAD text: {stage}REDUCE_GRAD, no microbatch, round trip") {
  for (int64_t stage : {0, 1, 7, 1023}) {
    const Action action{ActionKind::REDUCE_GRAD, stage, 0};
    CHECK(to_string(action) == std::to_string(stage) + "REDUCE_GRAD");
    CHECK(parse_action(to_string(action)) == action);
  }
  CHECK(parse_rank("1B3 1SEND_B3 1REDUCE_GRAD") ==
        RankProgram{{ActionKind::B, 1, 3}, {ActionKind::SEND_B, 1, 3}, {ActionKind::REDUCE_GRAD, 1, 0}});
  CHECK(format_rank(parse_rank("1B3 1SEND_B3 1REDUCE_GRAD"), false) == "1B3 1SEND_B3 1REDUCE_GRAD");
  CHECK(format_rank(parse_rank("1B3 1SEND_B3 1REDUCE_GRAD"), true) == "B3");
  CHECK(format_rank(parse_rank("0B3 1B3 1REDUCE_GRAD 0REDUCE_GRAD"), true) == "0B3 1B3");
  for (const char* bad : {"1REDUCE_GRAD0", "1REDUCE_GRAD3", "REDUCE_GRAD", "1REDUCE", "1REDUCE_GRAD "}) {
    CAPTURE(bad);
    REQUIRE_THROWS_WITH(parse_action(bad), ContainsSubstring(std::string("\"") + bad + "\"") &&
                                               ContainsSubstring("<stage>REDUCE_GRAD"));
  }
  REQUIRE_THROWS_WITH(parse_action("1REDUCE_GRAD3"),
                      ContainsSubstring("REDUCE_GRAD takes no microbatch, but \"3\" follows it"));
}

TEST_CASE("REDUCE_GRAD is neither a transfer nor a compute action for the helpers") {
  const Action reduce = parse_action("1REDUCE_GRAD");
  const Program chain = on_ranks(3, {0, 1, 2});
  REQUIRE_THROWS_WITH(matching_transfer(reduce), ContainsSubstring("1REDUCE_GRAD is not a transfer"));
  REQUIRE_THROWS_WITH(upstream_compute(reduce, 3),
                      ContainsSubstring("1REDUCE_GRAD is a gradient reduction action; expected a "
                                        "compute action"));
  REQUIRE_THROWS_AS(input_transfer(reduce, chain), ScheduleError);
  REQUIRE_THROWS_AS(output_transfer(reduce, chain), ScheduleError);
  REQUIRE_THROWS_WITH(message_tag(reduce, 4), ContainsSubstring("carry a message tag"));
  REQUIRE_THROWS_WITH(upstream_compute(parse_action("1SEND_F2"), 3),
                      ContainsSubstring("1SEND_F2 is a transfer action"));
}

TEST_CASE("parse_action rejects malformed text and says what it expected") {
  for (const char* bad :
       {"F3", "1X3", "-1F2", "1F", "1F3x", "1F3 ", " 1F3", "", "1", "1f3", "+1F3", "1F-3", "1SEND3",
        "1SEND_F", "01F3", "1F03", "1F3.0", "99999999999999999999F1", "1F1F1"}) {
    CAPTURE(bad);
    REQUIRE_THROWS_AS(parse_action(bad), ScheduleError);
    REQUIRE_THROWS_WITH(parse_action(bad), ContainsSubstring(std::string("\"") + bad + "\"") &&
                                               ContainsSubstring("<stage><kind><microbatch>") &&
                                               ContainsSubstring("SEND_F, RECV_F, SEND_B, RECV_B"));
  }
  REQUIRE_THROWS_WITH(parse_action("1X3"), ContainsSubstring("unknown kind \"X\""));
  REQUIRE_THROWS_WITH(parse_action("F3"), ContainsSubstring("missing stage"));
  REQUIRE_THROWS_WITH(parse_action("1F"), ContainsSubstring("missing microbatch"));
  REQUIRE_THROWS_WITH(parse_action("1F3x"), ContainsSubstring("\"x\" after the microbatch"));
}

TEST_CASE("parse_rank reads what format_rank writes") {
  const RankProgram program = parse_rank("0RECV_B0 0F0 0SEND_F0  0B0\n");
  REQUIRE(program.size() == 4);
  CHECK(program[0] == Action{ActionKind::RECV_B, 0, 0});
  CHECK(program[3] == Action{ActionKind::B, 0, 0});
  CHECK(format_rank(program, false) == "0RECV_B0 0F0 0SEND_F0 0B0");
  CHECK(parse_rank("").empty());
  CHECK(parse_rank("   ").empty());
  REQUIRE_THROWS_AS(parse_rank("0F0 0Q1"), ScheduleError);
}

TEST_CASE("format_rank: compute only drops transfers, and the stage when the rank runs one stage") {
  const RankProgram one_stage = parse_rank("1RECV_F0 1F0 1SEND_F0 1RECV_B0 1B0 1SEND_B0");
  CHECK(format_rank(one_stage, true) == "F0 B0");
  CHECK(format_rank(one_stage, false) == "1RECV_F0 1F0 1SEND_F0 1RECV_B0 1B0 1SEND_B0");
  const RankProgram two_stages = parse_rank("0F0 2F0 2SEND_F0 2B0 0B0");
  CHECK(format_rank(two_stages, true) == "0F0 2F0 2B0 0B0");
  CHECK(format_rank({}, true).empty());
}

TEST_CASE("matching_transfer pairs SEND and RECV across neighbouring stages") {
  CHECK(matching_transfer(parse_action("0SEND_F3")) == parse_action("1RECV_F3"));
  CHECK(matching_transfer(parse_action("1RECV_F3")) == parse_action("0SEND_F3"));
  CHECK(matching_transfer(parse_action("2SEND_B1")) == parse_action("1RECV_B1"));
  CHECK(matching_transfer(parse_action("1RECV_B1")) == parse_action("2SEND_B1"));
  REQUIRE_THROWS_AS(matching_transfer(parse_action("0F0")), ScheduleError);
  REQUIRE_THROWS_AS(matching_transfer(parse_action("0SEND_B0")), ScheduleError);
}

TEST_CASE("neighbour and transfer helpers follow stage_to_rank") {
  CHECK(upstream_compute(parse_action("0F2"), 3) == std::nullopt);
  CHECK(upstream_compute(parse_action("1F2"), 3) == parse_action("0F2"));
  CHECK(upstream_compute(parse_action("2B2"), 3) == std::nullopt);
  CHECK(upstream_compute(parse_action("1B2"), 3) == parse_action("2B2"));
  REQUIRE_THROWS_AS(upstream_compute(parse_action("1SEND_F2"), 3), ScheduleError);
  // I is a backward: its gradient comes from stage s+1. W moves nothing between stages.
  CHECK(upstream_compute(parse_action("1I2"), 3) == parse_action("2I2"));
  CHECK(upstream_compute(parse_action("2I2"), 3) == std::nullopt);
  CHECK(upstream_compute(parse_action("1W2"), 3) == std::nullopt);

  // One stage per rank: every neighbour is remote.
  const Program chain = on_ranks(3, {0, 1, 2});
  CHECK(input_transfer(parse_action("0F1"), chain) == std::nullopt);
  CHECK(input_transfer(parse_action("1F1"), chain) == parse_action("1RECV_F1"));
  CHECK(input_transfer(parse_action("1B1"), chain) == parse_action("1RECV_B1"));
  CHECK(input_transfer(parse_action("2B1"), chain) == std::nullopt);
  CHECK(output_transfer(parse_action("1F1"), chain) == parse_action("1SEND_F1"));
  CHECK(output_transfer(parse_action("2F1"), chain) == std::nullopt);
  CHECK(output_transfer(parse_action("1B1"), chain) == parse_action("1SEND_B1"));
  CHECK(output_transfer(parse_action("0B1"), chain) == std::nullopt);
  CHECK(input_transfer(parse_action("1I1"), chain) == parse_action("1RECV_B1"));
  CHECK(output_transfer(parse_action("1I1"), chain) == parse_action("1SEND_B1"));
  CHECK(input_transfer(parse_action("1W1"), chain) == std::nullopt);
  CHECK(output_transfer(parse_action("1W1"), chain) == std::nullopt);

  // Stages 0 and 1 share rank 0: only the 1 <-> 2 boundary needs transfers.
  const Program shared = on_ranks(3, {0, 0, 1});
  CHECK(input_transfer(parse_action("1F0"), shared) == std::nullopt);
  CHECK(output_transfer(parse_action("0F0"), shared) == std::nullopt);
  CHECK(output_transfer(parse_action("1F0"), shared) == parse_action("1SEND_F0"));
  CHECK(input_transfer(parse_action("2F0"), shared) == parse_action("2RECV_F0"));
  CHECK(input_transfer(parse_action("1B0"), shared) == parse_action("1RECV_B0"));
  CHECK(output_transfer(parse_action("1B0"), shared) == std::nullopt);
}

TEST_CASE("message_tag: a SEND and its RECV share a tag; tags are unique and non-negative") {
  // tag = ((receiving stage * m) + microbatch) * 2 + (0 activation, 1 gradient)
  CHECK(message_tag(parse_action("1RECV_F3"), 8) == 22);
  CHECK(message_tag(parse_action("0SEND_F3"), 8) == 22);
  CHECK(message_tag(parse_action("1RECV_B3"), 8) == 23);
  CHECK(message_tag(parse_action("2SEND_B3"), 8) == 23);
  CHECK(message_tag(parse_action("0RECV_B0"), 8) == 1);

  const int64_t p = 5;
  const int64_t m = 7;
  std::set<int64_t> tags;
  for (int64_t s = 0; s < p; ++s) {
    for (int64_t j = 0; j < m; ++j) {
      if (s + 1 < p) {
        const int64_t tag = message_tag({ActionKind::SEND_F, s, j}, m);
        CHECK(tag == message_tag({ActionKind::RECV_F, s + 1, j}, m));
        CHECK(tags.insert(tag).second);
      }
      if (s > 0) {
        const int64_t tag = message_tag({ActionKind::SEND_B, s, j}, m);
        CHECK(tag == message_tag({ActionKind::RECV_B, s - 1, j}, m));
        CHECK(tags.insert(tag).second);
      }
    }
  }
  CHECK(tags.size() == static_cast<size_t>(2 * (p - 1) * m));
  CHECK(*tags.begin() >= 0);
  CHECK(*tags.rbegin() < 2 * p * m);
  REQUIRE_THROWS_AS(message_tag(parse_action("0F0"), 8), ScheduleError);
  REQUIRE_THROWS_AS(message_tag(parse_action("1RECV_F8"), 8), ScheduleError);
  REQUIRE_THROWS_AS(message_tag(parse_action("0SEND_B1"), 8), ScheduleError);
}
