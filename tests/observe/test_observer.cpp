// Tests of what a run leaves in its run directory when a step fails on every rank: each rank's
// trace part (written on the way out) merged into one trace, the metrics of the steps done, the logs.
#include <catch2/catch_test_macros.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "config/load.hpp"
#include "job/local_job.hpp"
#include "observe/run_dir.hpp"
#include "runtime/trace.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace ppctl;

namespace {

std::string read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("a step failing on every rank still leaves a merged trace, the finished steps' metrics and logs",
          "[train][observe]") {
  const test::TempDir dir("ppctl_observer_test_");
  {
    std::ofstream text(dir.path / "corpus.txt");
    for (int i = 0; i < 200; ++i) text << "line " << i << ": sphinx of black quartz, judge my vow\n";
  }
  const auto spec_path = dir.path / "job.yaml";
  std::ofstream(spec_path) << R"(model: {layers: 2, hidden: 16, heads: 2, seq_len: 16}
pipeline: {stages: 2, schedule: 1f1b, microbatches: 2, micro_batch_size: 2}
data: {path: corpus.txt}
train: {steps: 4, on_nonfinite: stop}
runtime: {comm_timeout_s: 60}
)";
  const auto spec = config::load_job_spec(spec_path.string());
  const observe::RunDirectory run{(dir.path / "run").string(), runtime::wall_clock_us()};
  fs::create_directories(run.path);

  // NaN gradients on stage 1 at step 2: with on_nonfinite: stop every rank throws after the backward.
  const auto result = job::run_local_job(spec, 2, PPCTL_BINARY, spec_path.string(),
                                         {"--inject-nan", "1:2"}, observe::run_directory_env(run));
  CHECK(result.exit_code != 0);
  observe::finish_run_directory(run, 2, /*traced=*/true);

  // The rank the launcher saw fail first exited by itself, after writing its part on the way out;
  // the other one may have been stopped by the launcher before it wrote its own.
  REQUIRE(result.failed_rank.has_value());
  const int failed = *result.failed_rank;
  const fs::path trace = fs::path(run.path) / "trace.json";
  REQUIRE(fs::exists(trace));
  const auto events = nlohmann::json::parse(read(trace))["traceEvents"];
  std::set<int> ranks;
  std::set<int> steps;  // of the failed rank
  for (const auto& e : events) {
    if (e["ph"] != "X" || e["cat"] == "reduce") continue;  // gradient reductions: own tracks
    ranks.insert(e["tid"].get<int>());
    if (e["tid"] == failed) steps.insert(e["args"]["step"].get<int>());
  }
  CHECK(ranks.count(failed) == 1);
  CHECK(*ranks.rbegin() <= 1);
  CHECK(steps == std::set<int>{1, 2});  // step 2's actions ran before its gradients were checked

  // The last stage's rank wrote step 1 only, and no end line (the run did not finish).
  std::ifstream metrics(fs::path(run.path) / "metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(metrics, line);) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["event"] == "step");
  CHECK(lines[0]["step"] == 1);

  const auto log = read(fs::path(run.path) / fmt::format("rank{}.log", failed));
  INFO(log);
  CHECK(log.find(fmt::format("[rank {}] info: stage {} ", failed, failed)) != std::string::npos);
  CHECK(log.find(fmt::format("[rank {}] error: step 2:", failed)) != std::string::npos);
}
