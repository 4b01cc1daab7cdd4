// Tests of the schedule validator: hand-broken programs are rejected with the rule they break;
// split backwards (I/W) and virtual stages are accepted where they are right.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "schedule/action.hpp"
#include "schedule/generate.hpp"
#include "schedule/validate.hpp"
#include "support/errors.hpp"

using namespace ppctl;
using namespace ppctl::schedule;
using Catch::Matchers::ContainsSubstring;

namespace {

/// A program from per-rank text; stage s on rank s unless `stage_to_rank` says otherwise.
Program program_of(int64_t microbatches, std::vector<std::string> ranks,
                   std::vector<int64_t> stage_to_rank = {}) {
  Program program;
  program.num_microbatches = microbatches;
  for (const std::string& text : ranks) program.ranks.push_back(parse_rank(text));
  if (stage_to_rank.empty())
    for (size_t r = 0; r < ranks.size(); ++r) stage_to_rank.push_back(static_cast<int64_t>(r));
  program.num_stages = static_cast<int64_t>(stage_to_rank.size());
  program.stage_to_rank = std::move(stage_to_rank);
  return program;
}

/// The correct 1F1B program for p=2, m=2 (as in test_generate's golden), as text to edit.
const std::string kRank0 = "0F0 0SEND_F0 0RECV_B0 0F1 0SEND_F1 0RECV_B1 0B0 0B1";
const std::string kRank1 = "1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1";

/// The message validate() throws for `program` (fails the test if it does not throw).
std::string error_of(const Program& program) {
  return test::message_of<ScheduleError>(
      [&] { validate(program); }, "validate() accepted a broken program:\n" + format_grid(program));
}

std::string rule(const std::string& name) { return "(rule: " + name + ")"; }

}  // namespace

TEST_CASE("the reference program is valid") {
  CHECK_NOTHROW(validate(program_of(2, {kRank0, kRank1})));
  CHECK_NOTHROW(validate(program_of(1, {"0F0 0B0"})));
}

TEST_CASE("format_grid: one line per rank, markers and [end]") {
  const Program program = program_of(1, {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1B0 1SEND_B0"});
  CHECK(format_grid(program) ==
        "rank 0: 0F0 0SEND_F0 0RECV_B0 0B0\n"
        "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0");
  CHECK(format_grid(program, {3, 4}) ==
        "rank 0: 0F0 0SEND_F0 0RECV_B0 [0B0]\n"
        "rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 [end]");
  CHECK(format_grid(program, {kUnmarked, 0}) ==
        "rank 0: 0F0 0SEND_F0 0RECV_B0 0B0\n"
        "rank 1: [1RECV_F0] 1F0 1B0 1SEND_B0");
}

TEST_CASE("a missing RECV leaves its SEND unmatched") {
  const std::string message =
      error_of(program_of(2, {kRank0, "1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1"}));
  CHECK_THAT(message, ContainsSubstring(rule("every SEND has its RECV and vice versa")));
  CHECK_THAT(message, ContainsSubstring("0SEND_F0 on rank 0 has no matching 1RECV_F0 on rank 1"));
  CHECK_THAT(message, !ContainsSubstring("[0F0]"));
  CHECK_THAT(message, ContainsSubstring("rank 0: 0F0 [0SEND_F0]"));
}

TEST_CASE("a missing SEND leaves its RECV unmatched") {
  const std::string message =
      error_of(program_of(2, {"0F0 0SEND_F0 0RECV_B0 0F1 0RECV_B1 0B0 0B1", kRank1}));
  CHECK_THAT(message, ContainsSubstring(rule("every SEND has its RECV and vice versa")));
  CHECK_THAT(message, ContainsSubstring("[1RECV_F1]"));
  CHECK_THAT(message, ContainsSubstring("no matching 0SEND_F1 on rank 0"));
}

TEST_CASE("an extra SEND is rejected") {
  const std::string message = error_of(
      program_of(2, {"0F0 0SEND_F0 0SEND_F0 0RECV_B0 0F1 0SEND_F1 0RECV_B1 0B0 0B1", kRank1}));
  CHECK_THAT(message, ContainsSubstring(rule("each SEND and RECV exactly once")));
  CHECK_THAT(message, ContainsSubstring("0SEND_F0 appears again on rank 0, first at position 1"));
  CHECK_THAT(message, ContainsSubstring("0F0 0SEND_F0 [0SEND_F0]"));
}

TEST_CASE("a duplicated F is rejected") {
  const std::string message =
      error_of(program_of(2, {"0F0 0SEND_F0 0RECV_B0 0F1 0SEND_F1 0RECV_B1 0B0 0F1 0B1", kRank1}));
  CHECK_THAT(message, ContainsSubstring(rule("each F and B exactly once")));
  CHECK_THAT(message, ContainsSubstring("0F1 appears again"));
  CHECK_THAT(message, ContainsSubstring("0B0 [0F1] 0B1"));
}

TEST_CASE("a missing B is rejected") {
  const std::string message = error_of(program_of(2, {"0F0 0F1 0B0"}));
  CHECK_THAT(message, ContainsSubstring(rule("each F and B exactly once")));
  CHECK_THAT(message, ContainsSubstring("0B1 is missing"));
}

TEST_CASE("B before F on its rank is rejected") {
  const std::string message = error_of(program_of(2, {"0F0 0B1 0F1 0B0"}));
  CHECK_THAT(message, ContainsSubstring(rule("F before B on its rank")));
  CHECK_THAT(message, ContainsSubstring("0B1 comes before 0F1"));
  CHECK_THAT(message, ContainsSubstring("rank 0: 0F0 [0B1] 0F1 0B0"));

  const std::string swapped =
      error_of(program_of(2, {kRank0, "1RECV_F0 1RECV_F1 1B0 1F0 1SEND_B0 1F1 1B1 1SEND_B1"}));
  CHECK_THAT(swapped, ContainsSubstring(rule("F before B on its rank")));
  CHECK_THAT(swapped, ContainsSubstring("[1B0]"));
}

TEST_CASE("a cyclic wait is a deadlock, with every stuck rank marked in the grid") {
  // Rank 0 waits for the gradient of microbatch 0 before it sends that microbatch's activation.
  const Program program = program_of(1, {"0F0 0RECV_B0 0B0 0SEND_F0", "1RECV_F0 1F0 1B0 1SEND_B0"});
  const std::string message = error_of(program);
  CHECK_THAT(message, ContainsSubstring(rule("no deadlock")));
  CHECK_THAT(message, ContainsSubstring("rank 0 waits at 0B0 for 1SEND_B0 (rank 1)"));
  CHECK_THAT(message, ContainsSubstring("rank 1 waits at 1F0 for 0SEND_F0 (rank 0)"));
  CHECK_THAT(message, ContainsSubstring("rank 0: 0F0 0RECV_B0 [0B0] 0SEND_F0\n"
                                        "rank 1: 1RECV_F0 [1F0] 1B0 1SEND_B0"));
}

TEST_CASE("a deadlock marks finished ranks [end] and names only the stuck ones") {
  // Rank 2 runs no stage and finishes at once; ranks 0 and 1 wait on each other.
  const Program program =
      program_of(1, {"0F0 0RECV_B0 0B0 0SEND_F0", "1RECV_F0 1F0 1B0 1SEND_B0", ""}, {0, 1});
  const std::string message = error_of(program);
  CHECK_THAT(message, ContainsSubstring(rule("no deadlock")));
  CHECK_THAT(message, ContainsSubstring("rank 2: [end]"));
  CHECK_THAT(message, !ContainsSubstring("rank 2 waits"));
}

TEST_CASE("a three-rank wait chain that closes on itself is a deadlock") {
  // The last rank runs B1 before F0; B1 needs F1, which needs rank 1 to have sent F1, which rank 1
  // only does after B0, which needs the last rank's B0, which comes after B1.
  const Program program = program_of(
      2, {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0RECV_B1 0B0 0B1",
          "1RECV_F0 1RECV_F1 1F0 1SEND_F0 1RECV_B0 1RECV_B1 1B0 1SEND_B0 1F1 1SEND_F1 1B1 1SEND_B1",
          "2RECV_F0 2RECV_F1 2F1 2B1 2SEND_B1 2F0 2B0 2SEND_B0"});
  const std::string message = error_of(program);
  CHECK_THAT(message, ContainsSubstring(rule("no deadlock")));
  CHECK_THAT(message, ContainsSubstring("[0B0]"));
  CHECK_THAT(message, ContainsSubstring("[1B0]"));
  CHECK_THAT(message, ContainsSubstring("[2F1]"));
}

TEST_CASE("a RECV posted after its consumer is rejected") {
  const std::string message =
      error_of(program_of(2, {kRank0, "1F0 1RECV_F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1"}));
  CHECK_THAT(message, ContainsSubstring(rule("RECV before the compute that consumes it")));
  CHECK_THAT(message, ContainsSubstring("[1F0]"));
}

TEST_CASE("a SEND issued before its tensor is computed is rejected") {
  const std::string message =
      error_of(program_of(2, {"0SEND_F0 0F0 0RECV_B0 0F1 0SEND_F1 0RECV_B1 0B0 0B1", kRank1}));
  CHECK_THAT(message, ContainsSubstring(rule("SEND after the compute that produces it")));
  CHECK_THAT(message, ContainsSubstring("[0SEND_F0] 0F0"));
}

TEST_CASE("a cross-rank input without any transfer is rejected") {
  const std::string message = error_of(program_of(1, {"0F0 0RECV_B0 0B0", "1F0 1B0 1SEND_B0"}));
  CHECK_THAT(message, ContainsSubstring(rule("cross-rank input needs a SEND/RECV pair")));
  CHECK_THAT(message, ContainsSubstring("rank 1 never posts 1RECV_F0"));
  CHECK_THAT(message, ContainsSubstring("[1F0]"));
}

TEST_CASE("actions must sit on their stage's rank, in range, with a remote peer") {
  CHECK_THAT(error_of(program_of(1, {"0F0 1F0 1B0 0B0", ""})),
             ContainsSubstring(rule("action on the rank of its stage")) &&
                 ContainsSubstring("1F0 is on rank 0 but stage 1 runs on rank 1"));
  CHECK_THAT(
      error_of(program_of(1, {"0F0 0B0 0F1"})),
      ContainsSubstring(rule("stage and microbatch in range")) && ContainsSubstring("[0F1]"));
  CHECK_THAT(
      error_of(program_of(1, {"0F0 0SEND_F0 0B0"})),
      ContainsSubstring(rule("transfers only between neighbouring stages on different ranks")));
  CHECK_THAT(
      error_of(program_of(1, {"0F0 0SEND_F0 1RECV_F0 1F0 1B0 0B0"}, {0, 0})),
      ContainsSubstring(rule("transfers only between neighbouring stages on different ranks")) &&
          ContainsSubstring("both run on rank 0"));
}

TEST_CASE("stages on one rank must run in dependency order") {
  CHECK_NOTHROW(validate(program_of(1, {"0F0 1F0 1B0 0B0"}, {0, 0})));
  CHECK_THAT(error_of(program_of(1, {"1F0 0F0 1B0 0B0"}, {0, 0})),
             ContainsSubstring(rule("stages on one rank in dependency order")) &&
                 ContainsSubstring("[1F0]"));
}

TEST_CASE("bad geometry is rejected") {
  Program program = program_of(1, {"0F0 0B0"});
  program.stage_to_rank = {0, 1};
  CHECK_THAT(error_of(program), ContainsSubstring(rule("program geometry")));
  program = program_of(1, {"0F0 0B0"});
  program.stage_to_rank = {3};
  CHECK_THAT(error_of(program), ContainsSubstring(rule("program geometry")));
  program = program_of(1, {"0F0 0B0"});
  program.num_microbatches = 0;
  CHECK_THAT(error_of(program), ContainsSubstring(rule("program geometry")));
}

TEST_CASE("a reordered generated 1F1B schedule that breaks blocking order is caught") {
  // p=4, m=8 1F1B with rank 2 sending microbatch 1's activation only after B(wait_for). Rank 3
  // needs that activation before its B1, so waiting for B0 is fine and waiting for B1 deadlocks.
  const auto delayed = [](const std::string& wait_for) {
    Program program = generate(config::ScheduleKind::OneFOneB, 4, 8);
    RankProgram& rank2 = program.ranks[2];
    const auto send_f1 = std::find(rank2.begin(), rank2.end(), parse_action("2SEND_F1"));
    REQUIRE(send_f1 != rank2.end());
    const Action moved = *send_f1;
    rank2.erase(send_f1);
    const auto b = std::find(rank2.begin(), rank2.end(), parse_action(wait_for));
    REQUIRE(b != rank2.end());
    rank2.insert(b + 1, moved);
    return program;
  };
  CHECK_NOTHROW(validate(delayed("2B0")));
  const std::string message = error_of(delayed("2B1"));
  CHECK_THAT(message, ContainsSubstring(rule("no deadlock")));
  CHECK_THAT(message, ContainsSubstring("rank 2 waits at 2B1 for 3SEND_B1 (rank 3)"));
  CHECK_THAT(message, ContainsSubstring("rank 3 waits at 3F1 for 2SEND_F1 (rank 2)"));
  CHECK_THAT(message, ContainsSubstring("[2B1]"));
  CHECK_THAT(message, ContainsSubstring("[3F1]"));
}

// ------------------------------------------------------------------------------------------------
// Split backward (I and W) and virtual stages.

TEST_CASE("a split backward is valid: I communicates like B, W needs only its I") {
  CHECK_NOTHROW(validate(program_of(1, {"0F0 0I0 0W0"})));
  // p = 2, m = 1: rank 1 sends the input gradient right after I; its W runs later, locally.
  CHECK_NOTHROW(
      validate(program_of(1, {"0F0 0SEND_F0 0RECV_B0 0I0 0W0", "1RECV_F0 1F0 1I0 1SEND_B0 1W0"})));
  // Stages may differ: stage 1 split, stage 0 a full B that consumes I's gradient.
  CHECK_NOTHROW(
      validate(program_of(1, {"0F0 0SEND_F0 0RECV_B0 0B0", "1RECV_F0 1F0 1I0 1SEND_B0 1W0"})));
  // The gradient of a split stage also feeds a stage on the same rank.
  CHECK_NOTHROW(validate(program_of(1, {"0F0 1F0 1I0 0I0 1W0 0W0"}, {0, 0})));
}

TEST_CASE("a backward is one B, or one I and one W") {
  struct Case {
    const char* rank0;
    const char* rule;
    const char* detail;
  };
  const char* split = "each backward as one B, or as one I and one W";
  for (const Case& c : {
           Case{"0F0 0I0 0B0 0W0", split, "0B0 and 0I0 both appear"},
           Case{"0F0 0W0 0B0", split, "0B0 and 0W0 both appear"},
           Case{"0F0 0I0", split, "0W0 is missing (stage 0 runs on rank 0), but its I splits"},
           Case{"0F0 0W0", split, "0I0 is missing (stage 0 runs on rank 0), but its W splits"},
           Case{"0F0 0I0 0W0 0W0", "each F and B exactly once", "0W0 appears again"},
       }) {
    CAPTURE(c.rank0);
    const std::string message = error_of(program_of(1, {c.rank0}));
    CHECK_THAT(message, ContainsSubstring(rule(c.rule)) && ContainsSubstring(c.detail));
  }
  CHECK_THAT(error_of(program_of(1, {"0F0 0I0 0B0 0W0"})), ContainsSubstring("[0I0]"));
}

TEST_CASE("I after its F, W after its I, SEND_B after the I that computes it") {
  CHECK_THAT(error_of(program_of(1, {"0I0 0F0 0W0"})),
             ContainsSubstring(rule("F before B on its rank")) && ContainsSubstring("[0I0]"));
  CHECK_THAT(error_of(program_of(1, {"0F0 0W0 0I0"})),
             ContainsSubstring(rule("I before W on its rank")) &&
                 ContainsSubstring("0W0 comes before 0I0") && ContainsSubstring("[0W0]"));
  CHECK_THAT(
      error_of(program_of(1, {"0F0 0SEND_F0 0RECV_B0 0I0 0W0", "1RECV_F0 1F0 1SEND_B0 1I0 1W0"})),
      ContainsSubstring(rule("SEND after the compute that produces it")) &&
          ContainsSubstring("[1SEND_B0]"));
  // A local consumer of a split stage's gradient must come after its I.
  CHECK_THAT(error_of(program_of(1, {"0F0 1F0 0I0 1I0 1W0 0W0"}, {0, 0})),
             ContainsSubstring(rule("stages on one rank in dependency order")) &&
                 ContainsSubstring("[0I0]"));
}

TEST_CASE("waiting for a W never deadlocks a peer, waiting for an I can") {
  // Rank 1 defers W0 past F1 and I1: fine, nothing waits for W.
  CHECK_NOTHROW(
      validate(program_of(2, {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0RECV_B1 0I0 0W0 0I1 0W1",
                              "1RECV_F0 1RECV_F1 1F0 1I0 1SEND_B0 1F1 1I1 1SEND_B1 1W0 1W1"})));
  // Rank 0 runs I1 (which needs rank 1's I1) before sending F1, which rank 1 needs for I1.
  const std::string message =
      error_of(program_of(2, {"0F0 0SEND_F0 0RECV_B0 0RECV_B1 0F1 0I0 0I1 0SEND_F1 0W0 0W1",
                              "1RECV_F0 1RECV_F1 1F0 1I0 1SEND_B0 1F1 1I1 1SEND_B1 1W0 1W1"}));
  CHECK_THAT(message, ContainsSubstring(rule("no deadlock")));
  CHECK_THAT(message, ContainsSubstring("rank 0 waits at 0I1 for 1SEND_B1 (rank 1)"));
  CHECK_THAT(message, ContainsSubstring("rank 1 waits at 1F1 for 0SEND_F1 (rank 0)"));
}

TEST_CASE("generated interleaved and zero-bubble programs with one action moved are caught") {
  // ZB-H1 p=2, m=2: moving rank 1's W0 before its I0 breaks I before W.
  Program zb = generate({config::ScheduleKind::ZBH1, 2, 1, 2, 0});
  REQUIRE_NOTHROW(validate(zb));
  RankProgram& rank1 = zb.ranks[1];
  const auto w0 = std::find(rank1.begin(), rank1.end(), parse_action("1W0"));
  REQUIRE(w0 != rank1.end());
  const Action moved = *w0;
  rank1.erase(w0);
  rank1.insert(rank1.begin() + 1, moved);
  CHECK_THAT(error_of(zb), ContainsSubstring(rule("I before W on its rank")));

  // Interleaved p=2, v=2, m=2: rank 1 runs stage 3's backward before stage 3's forward reached it.
  Program interleaved = generate({config::ScheduleKind::Interleaved1F1B, 2, 2, 2, 0});
  REQUIRE_NOTHROW(validate(interleaved));
  RankProgram& r1 = interleaved.ranks[1];
  const auto b = std::find(r1.begin(), r1.end(), parse_action("3B0"));
  const auto f = std::find(r1.begin(), r1.end(), parse_action("3F0"));
  REQUIRE(b != r1.end());
  REQUIRE(f != r1.end());
  std::iter_swap(b, f);
  CHECK_THAT(error_of(interleaved), ContainsSubstring(rule("F before B on its rank")));
}
