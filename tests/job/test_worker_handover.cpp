// Tests of job/worker_handover.hpp: the launcher's copies of the validated spec and schedule texts, the
// variables naming them, and the worker reading them back (issue 26: the spec reaches the workers whole).
#include <stdlib.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <fmt/format.h>
#include <filesystem>
#include <map>
#include <string>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "job/worker_handover.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;
using ppctl::job::handed_over_texts;
using ppctl::job::hand_over_to_workers;

namespace {

/// Sets the variables `env` names in this process's environment (what a worker inherits) for the
/// scope; unsets every handover variable at the start and the end.
struct WorkerEnvironment {
  explicit WorkerEnvironment(const std::vector<std::pair<std::string, std::string>>& env) {
    clear();
    for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~WorkerEnvironment() { clear(); }
  static void clear() {
    for (const char* name : {ppctl::job::kSpecFileVariable, ppctl::job::kSpecHashVariable,
                             ppctl::job::kScheduleFileVariable, ppctl::job::kScheduleHashVariable,
                             ppctl::job::kProgramHashVariable})
      ::unsetenv(name);
  }
};

/// A prepared job holding only the texts (the handover reads nothing else but the program's hash).
ppctl::job::PreparedJob job_with(std::string spec_text, std::optional<std::string> schedule_text = std::nullopt) {
  ppctl::job::PreparedJob job;
  job.spec_text = std::move(spec_text);
  job.schedule_text = std::move(schedule_text);
  return job;
}

}  // namespace

TEST_CASE("a spec far over an environment variable's 128 KiB reaches the worker whole, through a file", "[job]") {
  ppctl::test::TempDir dir;
  // 600 KiB: a spec Linux could not pass in one environment string (MAX_ARG_STRLEN, 128 KiB).
  const std::string spec = "model: {layers: 2}\n# " + std::string(600 * 1024, 'x') + "\ndata: {path: a.txt}\n";
  const auto env = hand_over_to_workers(job_with(spec), dir.path.string());
  std::map<std::string, std::string> by_name(env.begin(), env.end());
  CHECK(by_name.size() == 3);  // the spec file, its hash, the program's hash: no schedule without one
  CHECK(by_name.at(ppctl::job::kSpecFileVariable) == (dir.path / "config.yaml").string());
  CHECK(by_name.at(ppctl::job::kSpecHashVariable) == fmt::format("{:016x}", ppctl::core::fnv1a64(spec)));
  CHECK(by_name.count(ppctl::job::kProgramHashVariable) == 1);
  for (const auto& [name, value] : env) CHECK(value.size() < 4096);
  CHECK(ppctl::core::read_file(dir.path / "config.yaml") == spec);

  const WorkerEnvironment worker(env);
  const auto texts = handed_over_texts();
  REQUIRE(texts);
  CHECK(texts->spec == spec);
  CHECK_FALSE(texts->schedule);
}

TEST_CASE("a custom schedule's text is handed over beside the spec", "[job]") {
  ppctl::test::TempDir dir;
  const std::string csv = "rank,actions\n0,F0 B0\n";
  const auto env = hand_over_to_workers(job_with("data: {path: a.txt}\n", csv), dir.path.string());
  CHECK(env.size() == 5);
  CHECK(ppctl::core::read_file(dir.path / "schedule.csv") == csv);
  const WorkerEnvironment worker(env);
  const auto texts = handed_over_texts();
  REQUIRE(texts);
  REQUIRE(texts->schedule);
  CHECK(*texts->schedule == csv);
}

TEST_CASE("a worker refuses a copy changed after launch, and reads nothing when no copy is named", "[job]") {
  ppctl::test::TempDir dir;
  {
    const WorkerEnvironment none({});
    CHECK_FALSE(handed_over_texts());  // started by torchrun, srun or by hand: the spec file is read instead
  }
  const auto env = hand_over_to_workers(job_with("train: {steps: 5}\n"), dir.path.string());
  ppctl::core::write_file_atomically(dir.path / "config.yaml", "train: {steps: 6}\n");
  const WorkerEnvironment worker(env);
  try {
    handed_over_texts();
    FAIL("a changed copy was accepted");
  } catch (const ppctl::ConfigError& e) {
    CHECK_THAT(e.what(), StartsWith((dir.path / "config.yaml").string() +
                                    ": this copy of what the launcher validated has changed since"));
    CHECK_THAT(e.what(), ContainsSubstring("(fix: leave the run directory's files unchanged"));
  }
  fs::remove(dir.path / "config.yaml");
  CHECK_THROWS_WITH(handed_over_texts(), ContainsSubstring((dir.path / "config.yaml").string()));
}
