// Tests for config/load's inputs: spec files (load_job_spec), the shipped example specs, a command-line
// --steps override, and field_location's SPEC:LINE for problems found after loading.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "core/error.hpp"
#include "support/load_helpers.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::StartsWith;
using namespace ppctl::config;
using namespace ppctl::config::load_test;

// ------------------------------------------------------------------------------------------------------------
// Files.

TEST_CASE("load_job_spec reads a file and resolves data against its folder", "[config][file]") {
  const TempDir dir;
  const fs::path text = dir.write("corpus/a.txt");
  const fs::path spec_file = dir.write("specs/job.yaml", "data:\n  path: ../corpus/*.txt\nmodel: {layers: 8}\n");
  const JobSpec spec = load_job_spec(spec_file.string());
  CHECK(spec.source == spec_file.string());
  CHECK(spec.model.layers == 8);
  CHECK(spec.data.files == std::vector<std::string>{text.string()});
}

TEST_CASE("load_job_spec names the file as given in every message", "[config][file]") {
  const TempDir dir;
  dir.write("job.yaml", "model:\n  layrs: 2\n");
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  std::vector<std::string> problems;
  try {
    load_job_spec("./job.yaml");
  } catch (const ppctl::ConfigError& e) {
    problems = e.problems();
  }
  fs::current_path(cwd);
  REQUIRE(problems.size() == 2);
  CHECK_THAT(problems[0], StartsWith("./job.yaml:1: data.path: required key is missing"));
  CHECK(problems[1] == "./job.yaml:2: model.layrs: unknown key (fix: did you mean 'layers'?)");
}

/// The one problem load_job_spec reports for `path`.
std::string only_load_problem(const std::string& path) {
  try {
    load_job_spec(path);
  } catch (const ppctl::ConfigError& e) {
    REQUIRE(e.problems().size() == 1);
    return e.problems()[0];
  }
  FAIL("expected a ConfigError for " << path);
  return {};
}

TEST_CASE("a spec file that cannot be read is one problem naming the path", "[config][file]") {
  const TempDir dir;
  const std::string missing = (dir.path() / "missing.yaml").string();
  CHECK(only_load_problem(missing) ==
        missing + ": cannot read the spec: No such file or directory (fix: check the path and its permissions)");
  CHECK(only_load_problem(dir.str()) ==
        dir.str() + ": cannot read the spec: it is a directory (fix: check the path and its permissions)");
}

TEST_CASE("a spec file without read permission is one problem naming the path", "[config][file]") {
  if (::geteuid() == 0) SKIP("root reads any file");
  const TempDir dir;
  const fs::path file = dir.write("locked.yaml", "data: {path: x}\n");
  fs::permissions(file, fs::perms::none);
  CHECK(only_load_problem(file.string()) ==
        file.string() + ": cannot read the spec: Permission denied (fix: check the path and its permissions)");
}

// ------------------------------------------------------------------------------------------------------------
// The shipped documentation and example.

TEST_CASE("every example spec in configs/ checkpoints, so a first Ctrl-C leaves a run to resume", "[config][docs]") {
  // Read as YAML, not loaded: example-tokens.yaml's dataset exists only once it is prepared.
  std::size_t examples = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(PPCTL_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    INFO(entry.path().string());
    ++examples;
    const YAML::Node spec = YAML::LoadFile(entry.path().string());
    REQUIRE(spec["checkpoint"].IsMap());
    CHECK_FALSE(spec["checkpoint"]["dir"].as<std::string>("").empty());
  }
  CHECK(examples >= 3);
}

TEST_CASE("configs/example.yaml loads", "[config][docs]") {
  // Its data are the text of Debian's `fortunes` package, which scripts/setup.sh installs.
  const JobSpec spec = load_job_spec(std::string(PPCTL_SOURCE_DIR) + "/configs/example.yaml");
  CHECK(spec.pipeline.stages >= 1);
  CHECK_FALSE(spec.data.files.empty());
}

TEST_CASE("configs/example-llama.yaml loads as a grouped-query Llama", "[config][docs]") {
  const JobSpec spec = load_job_spec(std::string(PPCTL_SOURCE_DIR) + "/configs/example-llama.yaml");
  CHECK(spec.model.arch == Arch::Llama);
  CHECK(kv_heads_of(spec.model) == 2);
  CHECK(ffn_hidden_of(spec.model) == 512);
  CHECK_FALSE(spec.model.tie_embeddings);
  CHECK_FALSE(spec.data.files.empty());
}

// ------------------------------------------------------------------------------------------------------------
// Command-line overrides and locations.

TEST_CASE("a command-line --steps is validated with the spec, named as the source of the value", "[config][override]") {
  const std::string yaml = with_data("optimizer: {lr_schedule: cosine, warmup_steps: 5}\ntrain: {steps: 10}\n");
  const auto base = corpus_dir().str();
  CHECK(parse_job_spec(yaml, "job.yaml", base, {20}).train.steps == 20);  // the effective value
  // The case: the spec's steps: 10 fits warmup 5, --steps 4 does not; the same rule as steps: 4 in the spec.
  std::vector<std::string> problems;
  try {
    parse_job_spec(yaml, "job.yaml", base, {4});
    FAIL("--steps 4 with warmup_steps 5 was accepted");
  } catch (const ppctl::ConfigError& e) {
    problems = e.problems();
  }
  REQUIRE(problems.size() == 1);
  const auto m = split(problems[0]);
  check(m, 1, "optimizer.warmup_steps", "5",
        "must be below the step count (--steps 4) for lr_schedule cosine: warmup would take every step, so the "
        "decay to optimizer.min_lr never happens");
  CHECK(m.hint == "lower optimizer.warmup_steps to at most 3, or pass --steps 6 or more");
  // An override replaces the spec's value before validation: a spec value the rule refuses is fine when replaced.
  CHECK(parse_job_spec(with_data("optimizer: {lr_schedule: cosine, warmup_steps: 5}\ntrain: {steps: 4}\n"),
                       "job.yaml", base, {6})
            .train.steps == 6);
  // Out of range (the worker's --steps has no CLI11 range check): named by the option, listed first.
  try {
    parse_job_spec(yaml, "job.yaml", base, {0});
    FAIL("--steps 0 was accepted");
  } catch (const ppctl::ConfigError& e) {
    REQUIRE(e.problems().size() == 1);
    CHECK(e.problems()[0] == "--steps 0: must be in [1, 1000000000] (fix: give a step count of at least 1)");
  }
}

TEST_CASE("field_location gives a key's SPEC:LINE for problems found after loading", "[config]") {
  const std::string text = "train: {steps: 5}\nobserve:\n  runs_dir: somewhere\ndata:\n  blend:\n"
                           "    - {weight: 1, path: a}\n    - weight: 1\n      path: b\n";
  CHECK(field_location(text, "job.yaml", "observe.runs_dir") == "job.yaml:3");
  CHECK(field_location(text, "job.yaml", "data.blend[0].path") == "job.yaml:6");
  CHECK(field_location(text, "job.yaml", "data.blend[1].path") == "job.yaml:8");
  CHECK(field_location(text, "job.yaml", "checkpoint.dir") == "job.yaml");  // not written: the file alone
  CHECK(field_location(text, "job.yaml", "data.blend[2].path") == "job.yaml");
  CHECK(field_location("[unclosed", "job.yaml", "observe.runs_dir") == "job.yaml");
}
