// Tests for config/load's pipeline section: virtual stages, microbatch groups, custom schedule files,
// pipeline.zb_auto, and the split of layers over stages (layers_per_stage, balance).
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "support/load_helpers.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::ContainsSubstring;
using namespace ppctl::config;
using namespace ppctl::config::load_test;

// ------------------------------------------------------------------------------------------------------------
// Schedules: virtual stages, microbatch groups, custom schedule files.

TEST_CASE("virtual_stages defaults to 2 for zbv and interleaved-1f1b, 1 otherwise", "[config][schedule]") {
  CHECK(parse_ok(with_data("pipeline: {schedule: zbv}\n")).pipeline.virtual_stages == 2);
  CHECK(parse_ok(with_data("pipeline: {schedule: interleaved-1f1b}\n")).pipeline.virtual_stages == 2);
  CHECK(parse_ok(with_data("pipeline: {schedule: zb-h1}\n")).pipeline.virtual_stages == 1);
  CHECK(parse_ok(with_data("pipeline: {schedule: gpipe}\n")).pipeline.virtual_stages == 1);
  const JobSpec four = parse_ok(
      with_data("model: {layers: 8}\npipeline: {stages: 2, schedule: interleaved-1f1b, virtual_stages: 4, "
                "microbatches: 8, microbatch_group_size: 4}\n"));
  CHECK(four.pipeline.virtual_stages == 4);
  CHECK(four.pipeline.microbatch_group_size == 4);
  // A broken schedule value leaves virtual_stages alone and adds no second problem.
  check(only_problem(with_data("pipeline:\n  schedule: zvb\n  virtual_stages: 2\n")), 2, "pipeline.schedule",
        "\"zvb\"", kSchedules);
}

TEST_CASE("virtual_stages must suit the schedule", "[config][schedule]") {
  struct Case {
    std::string schedule;
    std::string v;
    std::string rule;
    std::string hint;
  };
  const Case bad = GENERATE(
      Case{"1f1b", "2", "must be 1 with schedule 1f1b (one stage per rank)",
           "leave pipeline.virtual_stages out, or use schedule interleaved-1f1b or zbv for several stages per rank"},
      Case{"gpipe", "3", "must be 1 with schedule gpipe (one stage per rank)", ""},
      Case{"zb-h1", "2", "must be 1 with schedule zb-h1 (one stage per rank)", ""},
      Case{"zb-auto", "2", "must be 1 with schedule zb-auto (one stage per rank)", ""},
      Case{"zbv", "1", "must be 2 with schedule zbv (two stages per rank, in a V)",
           "set pipeline.virtual_stages: 2, or leave it out (2 is zbv's default)"},
      Case{"zbv", "4", "must be 2 with schedule zbv (two stages per rank, in a V)", ""},
      Case{"interleaved-1f1b", "1", "must be at least 2 with schedule interleaved-1f1b",
           "set pipeline.virtual_stages: 2 or more (2 is the default), or use schedule 1f1b"});
  const Message m =
      only_problem(with_data("model:\n  layers: 16\npipeline:\n  schedule: " + bad.schedule +
                             "\n  virtual_stages: " + bad.v + "\n"));
  check(m, 5, "pipeline.virtual_stages", bad.v, bad.rule);
  if (!bad.hint.empty()) CHECK(m.hint == bad.hint);
}

TEST_CASE("a virtual_stages that does not suit the schedule is not also checked against layers",
          "[config][schedule]") {
  const Message m = only_problem(with_data("model: {layers: 4}\npipeline: {stages: 4, schedule: 1f1b, virtual_stages: 2}\n"));
  check(m, 2, "pipeline.virtual_stages", "2", "must be 1 with schedule 1f1b (one stage per rank)");
}

TEST_CASE("layers must cover stages x virtual_stages", "[config][schedule][combination]") {
  const Message m = only_problem(
      with_data("model:\n  layers: 6\npipeline:\n  stages: 4\n  schedule: interleaved-1f1b\n  virtual_stages: 2\n"));
  check(m, 6, "pipeline.virtual_stages", "2",
        "pipeline.stages x pipeline.virtual_stages = 4 x 2 = 8 stages must not exceed model.layers (6)");
  CHECK(m.hint == "raise model.layers to 8 or more, or lower pipeline.stages to 3");

  // zbv's default of 2: reported at pipeline.stages' line, the value marked as the default.
  const Message defaulted =
      only_problem(with_data("model:\n  layers: 4\npipeline:\n  stages: 4\n  schedule: zbv\n"));
  check(defaulted, 4, "pipeline.virtual_stages", "2 (default)",
        "pipeline.stages x pipeline.virtual_stages = 4 x 2 = 8 stages must not exceed model.layers (4)");

  // Interleaved with room for fewer chunks: the hint offers that too.
  const Message chunks = only_problem(with_data(
      "model: {layers: 12}\npipeline: {stages: 4, schedule: interleaved-1f1b, virtual_stages: 4}\n"));
  CHECK(chunks.hint ==
        "raise model.layers to 16 or more, or lower pipeline.stages to 3, or lower pipeline.virtual_stages to 3");

  // One stage per rank keeps the original message.
  check(only_problem(with_data("model: {layers: 2}\npipeline: {stages: 3}\n")), 2, "pipeline.stages", "3",
        "must not exceed model.layers (2)");
  CHECK(parse_ok(with_data("model: {layers: 8}\npipeline: {stages: 4, schedule: zbv}\n")).pipeline.stages == 4);
}

TEST_CASE("microbatch_group_size applies only to interleaved-1f1b", "[config][schedule]") {
  const Message m =
      only_problem(with_data("pipeline:\n  schedule: 1f1b\n  microbatch_group_size: 4\n"));
  check(m, 3, "pipeline.microbatch_group_size", "4",
        "only applies to schedule interleaved-1f1b (pipeline.schedule is 1f1b)");
  CHECK(m.hint == "leave pipeline.microbatch_group_size out, or set pipeline.schedule: interleaved-1f1b");
  // Defaulted schedule (1f1b): reported at the key's own line.
  check(only_problem(with_data("pipeline:\n  microbatch_group_size: 2\n")), 2, "pipeline.microbatch_group_size", "2",
        "only applies to schedule interleaved-1f1b (pipeline.schedule is 1f1b)");
  CHECK(parse_ok(with_data("pipeline: {schedule: zbv, microbatch_group_size: 0}\n")).pipeline.microbatch_group_size ==
        0);
}

TEST_CASE("a custom schedule needs schedule_file, resolved to an absolute readable file", "[config][schedule]") {
  const TempDir dir;
  dir.write("corpus.txt");
  const fs::path csv = dir.write("schedules/mine.csv", "0F0,0B0\n");
  const JobSpec spec = parse_ok(
      with_data("pipeline:\n  schedule: custom\n  schedule_file: schedules/../schedules/mine.csv\n"), dir.str());
  CHECK(spec.pipeline.schedule == ScheduleKind::Custom);
  CHECK(spec.pipeline.schedule_file == csv.string());
  CHECK(spec.pipeline.virtual_stages == 1);
  CHECK(parse_ok(with_data("pipeline: {schedule: custom, virtual_stages: 3, schedule_file: " + csv.string() + "}\n"),
                 dir.str())
            .pipeline.schedule_file == csv.string());

  const Message missing = only_problem(with_data("pipeline:\n  stages: 1\n  schedule: custom\n"), dir.str());
  check(missing, 3, "pipeline.schedule_file", std::nullopt,
        "required key is missing: schedule custom reads its actions from a CSV file");
  CHECK_THAT(missing.hint, ContainsSubstring("docs/schedules.md"));

  const Message absent =
      only_problem(with_data("pipeline:\n  schedule: custom\n  schedule_file: nope.csv\n"), dir.str());
  check(absent, 3, "pipeline.schedule_file", "\"nope.csv\"",
        "names no readable file (" + (dir.path() / "nope.csv").string() + ": No such file or directory)");
  CHECK(absent.hint == "check the path; a relative path is resolved against " + dir.str());

  const Message folder =
      only_problem(with_data("pipeline:\n  schedule: custom\n  schedule_file: schedules\n"), dir.str());
  check(folder, 3, "pipeline.schedule_file", "\"schedules\"", "names a folder, not a regular file");

  const Message empty = only_problem(with_data("pipeline:\n  schedule: custom\n  schedule_file: \"\"\n"), dir.str());
  check(empty, 3, "pipeline.schedule_file", "\"\"", "must be a non-empty path");

  const Message other = only_problem(with_data("pipeline:\n  schedule: zb-h1\n  schedule_file: schedules/mine.csv\n"),
                                     dir.str());
  check(other, 3, "pipeline.schedule_file", "\"schedules/mine.csv\"",
        "is only read with schedule custom (pipeline.schedule is zb-h1)");
  CHECK(other.hint == "leave pipeline.schedule_file out, or set pipeline.schedule: custom");
}

TEST_CASE("pipeline.zb_auto: zb-auto's costs, one number for every stage or one per stage", "[config][schedule]") {
  const JobSpec given = parse_ok(with_data(
      "model: {layers: 4}\npipeline:\n  stages: 4\n  schedule: zb-auto\n  zb_auto: {f: 1.5, i: [0.1, 1, 1, 1], w: 2, "
      "b: [1.5, 2.5, 2.5, 2.25], defer_penalty: 0.4, p2p_latency: 0.05, max_in_flight: 6}\n"));
  const ZbAutoSpec& z = given.pipeline.zb_auto;
  CHECK(z.forward == std::vector<double>{1.5});
  CHECK(z.input_grad == std::vector<double>{0.1, 1, 1, 1});
  CHECK(z.weight_grad == std::vector<double>{2});
  CHECK(z.backward == std::vector<double>{1.5, 2.5, 2.5, 2.25});
  CHECK(z.defer_penalty == std::vector<double>{0.4});
  CHECK(z.p2p_latency == 0.05);
  CHECK(z.max_in_flight == 6);
  // Not written: plan's defaults (F = I = W = 1 ms, nothing for deferring or sending), limit 0 = stages.
  const ZbAutoSpec defaults = parse_ok(with_data("pipeline: {schedule: zb-auto}\n")).pipeline.zb_auto;
  CHECK(defaults.forward == std::vector<double>{1.0});
  CHECK(defaults.input_grad == std::vector<double>{1.0});
  CHECK(defaults.weight_grad == std::vector<double>{1.0});
  CHECK(defaults.backward.empty());  // b not given: B = I + W (schedule::zb_auto_cost_model)
  CHECK(defaults.defer_penalty == std::vector<double>{0.0});
  CHECK(defaults.p2p_latency == 0.0);
  CHECK(defaults.max_in_flight == 0);
  // b as one number for every stage.
  const ZbAutoSpec one_b =
      parse_ok(with_data("model: {layers: 4}\npipeline:\n  stages: 2\n  schedule: zb-auto\n  zb_auto: {b: 1.25}\n"))
          .pipeline.zb_auto;
  CHECK(one_b.backward == std::vector<double>{1.25});
  CHECK(one_b.input_grad == std::vector<double>{1.0});
}

TEST_CASE("pipeline.zb_auto: each problem names the key, the value, the rule and the fix", "[config][schedule]") {
  const std::string zb = "model: {layers: 4}\npipeline:\n  stages: 2\n  schedule: zb-auto\n  zb_auto: ";
  const Message length = only_problem(with_data(zb + "{i: [1, 2, 3]}\n"));
  check(length, 5, "pipeline.zb_auto.i", "[1, 2, 3]", "has 3 entries but pipeline.stages is 2");
  CHECK(length.hint == "give one number for every stage, or 2 (one per stage, in stage order)");

  const Message unknown = only_problem(with_data(zb + "{f: 1, wg: 2}\n"));
  check(unknown, 5, "pipeline.zb_auto.wg", std::nullopt,
        "unknown key: zb-auto takes f, i, w, b, defer_penalty, p2p_latency, max_in_flight");
  CHECK(unknown.hint == "did you mean 'w'?");

  check(only_problem(with_data(zb + "{w: -1}\n")), 5, "pipeline.zb_auto.w", "-1", "must be in [0, 1000000000]");
  const Message b_length = only_problem(with_data(zb + "{b: [1, 2, 3]}\n"));
  check(b_length, 5, "pipeline.zb_auto.b", "[1, 2, 3]", "has 3 entries but pipeline.stages is 2");
  CHECK(b_length.hint == "give one number for every stage, or 2 (one per stage, in stage order)");
  check(only_problem(with_data(zb + "{b: -0.5}\n")), 5, "pipeline.zb_auto.b", "-0.5", "must be in [0, 1000000000]");
  check(only_problem(with_data(zb + "{b: fast}\n")), 5, "pipeline.zb_auto.b", "\"fast\"", "must be a number");
  check(only_problem(with_data(zb + "{b: [1, x]}\n")), 5, "pipeline.zb_auto.b[1]", "\"x\"", "must be a number");
  check(only_problem(with_data(zb + "{defer_penalty: [0.1, x]}\n")), 5, "pipeline.zb_auto.defer_penalty[1]",
        "\"x\"", "must be a number");
  check(only_problem(with_data(zb + "{max_in_flight: 1.5}\n")), 5, "pipeline.zb_auto.max_in_flight", "1.5",
        "must be an integer");
  check(only_problem(with_data(zb + "{f: []}\n")), 5, "pipeline.zb_auto.f", "[]",
        "must be a number (every stage) or a non-empty list of numbers (one per stage), in ms");
  const Message scalar = only_problem(with_data(zb + "3\n"));
  check(scalar, 5, "pipeline.zb_auto", "3", "must be a mapping of zb-auto's costs in ms");

  // The value is a mapping (its ": " would confuse split()): the whole line.
  const auto other = problems_of(with_data("pipeline:\n  schedule: zb-h1\n  zb_auto: {w: 2}\n"));
  REQUIRE(other.size() == 1);
  CHECK(other[0] ==
        "job.yaml:3: pipeline.zb_auto: value {f: 1, i: 1, w: 2, defer_penalty: 0, p2p_latency: 0, max_in_flight: 0}: "
        "only applies to schedule zb-auto (pipeline.schedule is zb-h1) (fix: leave pipeline.zb_auto out, or set "
        "pipeline.schedule: zb-auto)");
  // b, when written, is in the value too; still refused with another schedule.
  const auto other_b = problems_of(with_data("pipeline:\n  schedule: 1f1b\n  zb_auto: {b: [1.5, 2]}\n"));
  REQUIRE(other_b.size() == 1);
  // (A value this long is cut, saying its length.)
  CHECK_THAT(other_b[0], ContainsSubstring("pipeline.zb_auto: value {f: 1, i: 1, w: 1, b: [1.5, 2], defer_penalty: 0, "
                                           "p2p_latency: 0, max_in_flight:... (83 bytes in all): only applies to "
                                           "schedule zb-auto (pipeline.schedule is 1f1b)"));
}

TEST_CASE("an unreadable schedule_file is named", "[config][schedule]") {
  if (::geteuid() == 0) SKIP("root reads any file");
  const TempDir dir;
  const fs::path csv = dir.write("locked.csv", "0F0,0B0\n");
  fs::permissions(csv, fs::perms::none);
  const Message locked = only_problem(
      with_data("pipeline:\n  schedule: custom\n  schedule_file: " + csv.string() + "\n"), corpus_dir().str());
  check(locked, 3, "pipeline.schedule_file", "\"" + csv.string() + "\"",
        "cannot be read (" + csv.string() + ": Permission denied)");
  CHECK(locked.hint == "check the file's permissions");
}

// ------------------------------------------------------------------------------------------------------------
// Layers per stage.

TEST_CASE("pipeline.layers_per_stage and pipeline.balance: read and checked against the model", "[config][layout]") {
  const JobSpec split = parse_ok(with_data("model: {layers: 8}\npipeline: {stages: 2, virtual_stages: 2, schedule: "
                                           "interleaved-1f1b, layers_per_stage: [1, 3, 3, 1]}\n"));
  CHECK(split.pipeline.layers_per_stage == std::vector<int64_t>{1, 3, 3, 1});
  CHECK(split.pipeline.balance == "uniform");
  CHECK(parse_ok(with_data("pipeline: {balance: auto}\n")).pipeline.balance == "auto");

  const Message sum = only_problem(with_data("model: {layers: 12}\npipeline:\n  stages: 4\n  layers_per_stage: "
                                             "[3, 3, 2, 2]\n"));
  check(sum, 4, "pipeline.layers_per_stage", "[3, 3, 2, 2]", "sums to 10 but model.layers is 12");
  CHECK(sum.hint == "make the entries add up to 12 (or set model.layers: 10)");

  const Message count = only_problem(with_data("model: {layers: 12}\npipeline:\n  stages: 4\n  layers_per_stage: "
                                               "[4, 4, 4]\n"));
  check(count, 4, "pipeline.layers_per_stage", "[4, 4, 4]",
        "has 3 entries but pipeline.stages x pipeline.virtual_stages = 4 x 1 = 4");
  CHECK(count.hint == "give one block count per stage (4 entries), in stage order");

  const Message both = only_problem(with_data("model: {layers: 4}\npipeline:\n  stages: 2\n  balance: auto\n"
                                              "  layers_per_stage: [3, 1]\n"));
  check(both, 5, "pipeline.layers_per_stage", "[3, 1]",
        "excludes pipeline.balance auto (an explicit split, or one chosen by ppctl, not both)");

  check(only_problem(with_data("model: {layers: 4}\npipeline: {stages: 2, layers_per_stage: [4, 0]}\n")), 2,
        "pipeline.layers_per_stage[1]", "0", "must be in [1, 10000]; every stage holds at least one block");
  check(only_problem(with_data("pipeline: {layers_per_stage: []}\n")), 1, "pipeline.layers_per_stage", "[]",
        "must be a non-empty list of block counts, one per stage (stages x virtual_stages entries)");
  const Message typo = only_problem(with_data("pipeline: {balance: atuo}\n"));
  check(typo, 1, "pipeline.balance", "\"atuo\"", "must be one of uniform, auto");
  CHECK(typo.hint == "did you mean 'auto'?");
}
