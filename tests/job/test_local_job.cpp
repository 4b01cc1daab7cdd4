// Tests of job::run_local_job's restart loop (train.max_restarts): how often the workers are
// started, with which --resume, and the final result. The workers are a shell script (no torch).
#include <sys/stat.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "job/local_job.hpp"
#include "observe/run_dir.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;

namespace {

/// A fake worker: appends its arguments to DIR/starts (one line per start), runs the shell command
/// `on_start`, then exits with the code FAIL_CODE while DIR/starts has fewer than FAIL_TIMES lines
/// (0 afterwards).
fs::path write_fake_worker(const fs::path& dir, int fail_code, int fail_times,
                           const std::string& on_start = ":") {
  const fs::path script = dir / "worker.sh";
  std::ofstream(script) << "#!/bin/sh\n"
                        << "echo \"$*\" >> '" << (dir / "starts").string() << "'\n"
                        << on_start << "\n"
                        << "[ \"$(wc -l < '" << (dir / "starts").string() << "')\" -le " << fail_times
                        << " ] && exit " << fail_code << "\n"
                        << "exit 0\n";
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

std::vector<std::string> starts(const fs::path& dir) {
  std::vector<std::string> lines;
  std::ifstream in(dir / "starts");
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

ppctl::config::JobSpec restart_spec(int64_t max_restarts) {
  ppctl::config::JobSpec spec;
  spec.train.max_restarts = max_restarts;
  spec.train.restart_backoff_s = 0.0;
  spec.runtime.comm_timeout_s = 10.0;
  return spec;
}

/// run_local_job of one fake worker (write_fake_worker(dir, fail_code, fail_times)) in `dir`.
ppctl::launch::LaunchResult run_fake_job(const fs::path& dir, const ppctl::config::JobSpec& spec,
                                         int fail_code, int fail_times,
                                         const std::vector<std::string>& args = {},
                                         const std::vector<std::pair<std::string, std::string>>& env = {},
                                         const std::string& on_start = ":") {
  const auto worker = write_fake_worker(dir, fail_code, fail_times, on_start);
  return ppctl::job::run_local_job(spec, 1, worker.string(), (dir / "job.yaml").string(), args, env);
}

}  // namespace

TEST_CASE("a failing job is restarted max_restarts times, then given up naming the last cause") {
  const ppctl::test::TempDir dir("ppctl_local_job_");
  const auto result = run_fake_job(dir.path, restart_spec(2), 1, 100);
  CHECK(starts(dir.path).size() == 3);
  CHECK(result.exit_code == 1);
  CHECK(result.message ==
        "gave up after 2 restarts (train.max_restarts); last cause: rank 0 exited with code 1");
}

TEST_CASE("without max_restarts a failure is final") {
  const ppctl::test::TempDir dir("ppctl_local_job_");
  const auto result = run_fake_job(dir.path, restart_spec(0), 3, 100);
  CHECK(starts(dir.path).size() == 1);
  CHECK(result.exit_code == 3);
  CHECK(result.message == "rank 0 exited with code 3");
}

TEST_CASE("a worker's bad-input exit (code 2) is not restarted") {
  const ppctl::test::TempDir dir("ppctl_local_job_");
  const auto result = run_fake_job(dir.path, restart_spec(3), 2, 100);
  CHECK(starts(dir.path).size() == 1);
  CHECK(result.exit_code == 2);
}

TEST_CASE("a restart resumes from the latest complete checkpoint and keeps the attempt's metrics") {
  const ppctl::test::TempDir dir("ppctl_local_job_");
  auto spec = restart_spec(3);
  spec.checkpoint.dir = (dir.path / "ckpt").string();
  fs::create_directories(dir.path / "run");
  std::ofstream(dir.path / "run" / "metrics.jsonl") << "{\"step\": 1}\n";
  // The failing attempt writes checkpoint step 3.
  const auto ckpt = (dir.path / "ckpt").string();
  const std::string write_checkpoint = "mkdir -p '" + ckpt + "/step-00000003' && echo '{}' > '" + ckpt +
                                       "/step-00000003/meta.json' && echo step-00000003 > '" + ckpt + "/latest'";
  const auto result = run_fake_job(dir.path, spec, 1, 1, {"--resume", "/earlier/ckpt"},  // fails once
                                   {{ppctl::observe::kRunDirVariable, (dir.path / "run").string()}},
                                   write_checkpoint);
  CHECK(result.exit_code == 0);
  const auto lines = starts(dir.path);
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0], ContainsSubstring("--resume /earlier/ckpt"));
  CHECK_THAT(lines[1], ContainsSubstring("--resume " + (dir.path / "ckpt" / "step-00000003").string()));
  CHECK_THAT(lines[1], !ContainsSubstring("/earlier/ckpt"));
  CHECK(fs::exists(dir.path / "run" / "metrics.attempt1.jsonl"));
  CHECK_FALSE(fs::exists(dir.path / "run" / "metrics.jsonl"));  // the fake worker writes none
}

TEST_CASE("a restart without any checkpoint yet starts the job as it was first started") {
  const ppctl::test::TempDir dir("ppctl_local_job_");
  auto spec = restart_spec(1);
  spec.checkpoint.dir = (dir.path / "ckpt").string();  // never written
  const auto result = run_fake_job(dir.path, spec, 1, 1, {"--steps", "5"});
  CHECK(result.exit_code == 0);
  const auto lines = starts(dir.path);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == lines[1]);
  CHECK_THAT(lines[1], !ContainsSubstring("--resume"));
}

TEST_CASE("a restart never resumes from a checkpoint another run left in checkpoint.dir") {
  // QA finding: a new run in a folder holding an earlier run's step 520 restarted from it.
  const ppctl::test::TempDir dir("ppctl_local_job_");
  auto spec = restart_spec(1);
  spec.checkpoint.dir = (dir.path / "ckpt").string();
  fs::create_directories(dir.path / "ckpt" / "step-00000520");
  std::ofstream(dir.path / "ckpt" / "step-00000520" / "meta.json") << "{}";
  std::ofstream(dir.path / "ckpt" / "latest") << "step-00000520\n";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--steps", "5"}, std::vector<std::string>{"--resume", "/earlier/ckpt"}}) {
    fs::remove(dir.path / "starts");
    const auto result = run_fake_job(dir.path, spec, 1, 1, args);
    CHECK(result.exit_code == 0);
    const auto lines = starts(dir.path);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0] == lines[1]);  // as first started: from the start, or from its own --resume
    CHECK_THAT(lines[1], !ContainsSubstring("step-00000520"));
  }
}
