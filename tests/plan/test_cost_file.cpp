// Tests of plan/cost_file: a per-layer costs file (JSON) read into times, and every kind of bad input
// named by file, field, value, rule and fix.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "plan/cost_file.hpp"
#include "support/temp_dir.hpp"

using namespace ppctl;
using Catch::Matchers::ContainsSubstring;

namespace {

/// The message parse_cost_file throws for `text` (4 blocks), or "" when it does not throw.
std::string problem(const std::string& text) {
  try {
    plan::parse_cost_file(text, "c.json", 4);
  } catch (const PlanError& e) {
    return e.what();
  }
  return "";
}

const std::string kEnds = R"("embedding": {"forward_ms": 0.1, "backward_ms": 0.2}, "head": {"forward_ms": 7, "backward_ms": 5})";

}  // namespace

TEST_CASE("parse_cost_file: one time for every block, or one per block") {
  auto t = plan::parse_cost_file(R"({"block": {"forward_ms": 0.75, "backward_ms": 2.5}, )" + kEnds + "}", "c.json", 4);
  REQUIRE(t.blocks.size() == 4);
  CHECK(t.blocks[3].forward_ms == 0.75);
  CHECK(t.blocks[3].backward_ms == 2.5);
  CHECK(t.embedding.backward_ms == 0.2);
  CHECK(t.head.forward_ms == 7.0);
  t = plan::parse_cost_file(R"({"blocks": [{"forward_ms": 1, "backward_ms": 2}, {"forward_ms": 3, "backward_ms": 4},
      {"forward_ms": 5, "backward_ms": 6}, {"forward_ms": 7, "backward_ms": 0}], )" + kEnds + "}", "c.json", 4);
  REQUIRE(t.blocks.size() == 4);
  CHECK(t.blocks[1].forward_ms == 3.0);
  CHECK(t.blocks[3].backward_ms == 0.0);
}

TEST_CASE("parse_cost_file: every bad input names the file, the field, the value, the rule and the fix") {
  const std::string block = R"("block": {"forward_ms": 1, "backward_ms": 2}, )";
  CHECK_THAT(problem("{\"block\": "), ContainsSubstring("c.json: not JSON") && ContainsSubstring("line 1") &&
                                          ContainsSubstring("fix: "));
  CHECK_THAT(problem("[1, 2]"), ContainsSubstring("c.json: (top level): value [1,2]: must be an object"));
  CHECK_THAT(problem("{" + block + kEnds + R"(, "hed": 1})"),
             ContainsSubstring("c.json: hed: unknown key (fix: did you mean 'head'?"));
  CHECK_THAT(problem("{" + kEnds + "}"), ContainsSubstring("c.json: block: missing (and no blocks)") &&
                                             ContainsSubstring("4 entries"));
  CHECK_THAT(problem("{" + block + R"("blocks": [], )" + kEnds + "}"),
             ContainsSubstring("c.json: block: given together with blocks (fix: give block"));
  CHECK_THAT(problem(R"({"blocks": [{"forward_ms": 1, "backward_ms": 2}], )" + kEnds + "}"),
             ContainsSubstring("c.json: blocks: 1 entries, but model.layers is 4 (fix: give one"));
  CHECK_THAT(problem(R"({"blocks": 3, )" + kEnds + "}"), ContainsSubstring("c.json: blocks: value 3: must be a list of 4"));
  CHECK_THAT(problem(R"({"block": {"forward_ms": -1, "backward_ms": 2}, )" + kEnds + "}"),
             ContainsSubstring("c.json: block.forward_ms: value -1: must be finite and >= 0") && ContainsSubstring("fix: "));
  CHECK_THAT(problem(R"({"block": {"forward_ms": 1e999, "backward_ms": 2}, )" + kEnds + "}"),
             ContainsSubstring("c.json: not JSON") && ContainsSubstring("number overflow"));
  CHECK_THAT(problem(R"({"block": {"forward_ms": "fast", "backward_ms": 2}, )" + kEnds + "}"),
             ContainsSubstring("c.json: block.forward_ms: value \"fast\": must be a number"));
  CHECK_THAT(problem(R"({"block": {"forward_ms": 1}, )" + kEnds + "}"),
             ContainsSubstring("c.json: block.backward_ms: missing (fix: add \"backward_ms\""));
  CHECK_THAT(problem(R"({"block": {"forward_ms": 1, "backward_ms": 1, "fwd": 2}, )" + kEnds + "}"),
             ContainsSubstring("c.json: block.fwd: unknown key"));
  CHECK_THAT(problem(R"({"block": {"forward_ms": 0, "backward_ms": 0}, )" + kEnds + "}"),
             ContainsSubstring("c.json: block: forward_ms + backward_ms is 0"));
  CHECK_THAT(problem(R"({"block": 5, )" + kEnds + "}"),
             ContainsSubstring("c.json: block: value 5: must be an object of forward_ms and backward_ms"));
  CHECK_THAT(problem("{" + block + R"("head": {"forward_ms": 1, "backward_ms": 1}})"),
             ContainsSubstring("c.json: embedding: missing"));
  // Several problems: all of them, one line each.
  const auto all = problem(R"({"block": {"forward_ms": -1, "backward_ms": -2}, "head": 3})");
  CHECK_THAT(all, ContainsSubstring("block.forward_ms") && ContainsSubstring("block.backward_ms") &&
                      ContainsSubstring("embedding: missing") && ContainsSubstring("head: value 3"));
  CHECK(std::count(all.begin(), all.end(), '\n') == 3);
}

TEST_CASE("parse_cost_file: an optional micro_batch_size, a whole number >= 1") {
  const std::string block = R"({"block": {"forward_ms": 1, "backward_ms": 2}, )" + kEnds;
  CHECK(plan::parse_cost_file(block + "}", "c.json", 4).micro_batch_size == 0);
  CHECK(plan::parse_cost_file(block + R"(, "micro_batch_size": 8})", "c.json", 4).micro_batch_size == 8);
  for (const std::string bad : {"0", "-2", "1.5", "\"4\""}) {
    INFO(bad);
    CHECK_THAT(problem(block + R"(, "micro_batch_size": )" + bad + "}"),
               ContainsSubstring("c.json: micro_batch_size: value") && ContainsSubstring("whole number >= 1"));
  }
}

TEST_CASE("read_cost_file: reads a file; an unreadable one is named") {
  test::TempDir dir;
  const auto path = (dir.path / "costs.json").string();
  test::write_checked(path, R"({"block": {"forward_ms": 1, "backward_ms": 2}, )" + kEnds + "}");
  CHECK(plan::read_cost_file(path, 2).blocks.size() == 2);
  CHECK_THROWS_WITH(plan::read_cost_file((dir.path / "none.json").string(), 2),
                    ContainsSubstring("none.json: cannot be read"));
}
