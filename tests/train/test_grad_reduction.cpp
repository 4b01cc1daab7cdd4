// The gradient reduction inside the schedule and the executor's memory that does not grow with m, end to
// end in real worker processes: REDUCE_GRAD against the reduction after the schedule (the same bits:
// losses, gradient norms, the final checkpoint's weights and AdamW moments),
// both copies of a tied embedding and their AdamW moments bitwise equal in every replica, and the sends
// in flight bounded by the microbatches in flight.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)
#include <catch2/generators/catch_generators.hpp>
#include <catch2/generators/catch_generators_range.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "config/load.hpp"
#include "plan/layout.hpp"
#include "schedule/job_program.hpp"
#include "schedule/memory_plan.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_job.hpp"

namespace fs = std::filesystem;
using namespace ppctl;
using namespace ppctl::test;

namespace {

/// The bytes of every file of the checkpoint folder `step` (the units' weights and AdamW state), by name.
std::map<std::string, std::string> checkpoint_files(const fs::path& step) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(step)) {
    if (entry.path().extension() != ".pt") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    files[entry.path().filename().string()].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return files;
}

}  // namespace

TEST_CASE("REDUCE_GRAD in the schedule gives the bits of the reduction after it, tied copies and moments equal") {
  // dp 2 x pp 2, 10 steps, every schedule family; small buckets (several per stage). Both modes run
  // the same collectives on the same values, only started at other times: the losses, gradient norms
  // and final weights must be bitwise equal. The tied copies (stage 0's embedding, the last stage's
  // head) and their AdamW moments end bitwise equal on both replicas.
  at::set_num_threads(1);
  const std::string schedule = GENERATE(from_range(kScheduleFamilies));
  const std::string name = schedule.substr(0, schedule.find(','));
  INFO(name);
  std::map<bool, std::map<int64_t, LoggedStep>> logged;
  std::map<bool, std::map<std::string, std::string>> saved;
  std::map<bool, std::vector<std::string>> hashes;
  for (const bool overlap : {true, false}) {
    const auto dir = fresh_dir(fmt::format("reduce_{}_{}", name, overlap));
    Job job{2, 4, 2, 10};
    job.pipeline = ", data_parallel: 2";
    job.runtime = fmt::format(", overlap_grad_reduce: {}, grad_bucket_size: 3000", overlap);
    job.train = ", log_interval: 1";
    job.sections = "checkpoint: {dir: ckpt}\n";
    const auto spec = edit_spec(make_job(job, dir), "schedule: 1f1b", "schedule: " + schedule);
    const auto run = run_job(spec, {});
    INFO(run.output);
    REQUIRE(run.result.exit_code == 0);
    logged[overlap] = logged_steps(run.output);
    REQUIRE(logged[overlap].size() == 10);
    saved[overlap] = checkpoint_files(dir / "ckpt" / "step-00000010");
    REQUIRE(saved[overlap].size() >= 3);  // the embedding, blocks, the head
    hashes[overlap] = tied_hashes(run.output);
    REQUIRE(hashes[overlap].size() == 4);  // 2 copies x 2 replicas
    CHECK(std::set<std::string>(hashes[overlap].begin(), hashes[overlap].end()).size() == 1);
  }
  for (const auto& [step, line] : logged[true]) {
    CHECK(line.loss == logged[false].at(step).loss);
    CHECK(line.grad_norm == logged[false].at(step).grad_norm);
  }
  CHECK(hashes[true] == hashes[false]);
  // Every weight and AdamW moment after the last step, bit for bit.
  CHECK(saved[true] == saved[false]);
}

TEST_CASE("the sends in flight on a rank are bounded by the microbatches in flight, not by m") {
  // Before issue 23 every send was kept to the step's end: 2 m v on a middle rank. Now a send is freed
  // once the schedule shows its peer received it (or the backend reports it complete). 4 stages,
  // m = 4 and 32: each rank's measured sends in flight stay within the plan's count of buffers alive
  // (schedule::estimate_memory, which frees sends where schedule::send_release_points says), and that
  // count is the same at m = 32 as at m = 64.
  at::set_num_threads(1);
  const std::string schedule = GENERATE("1f1b", "interleaved-1f1b, virtual_stages: 2");
  INFO(schedule);
  for (const int64_t m : {4, 32}) {
    Job job{4, m, 1, 1};
    const auto dir = fresh_dir(fmt::format("sends_m{}", m));
    job.sections = fmt::format("observe: {{runs_dir: {}, trace_steps: 0}}\n", (dir / "runs").string());
    const auto spec_path = edit_spec(make_job(job, dir), "schedule: 1f1b", "schedule: " + schedule);
    edit_spec(spec_path, "layers: 4", "layers: 8");  // interleaved: 4 x 2 stages need 8 blocks
    auto spec = config::load_job_spec(spec_path.string());
    const auto planned = [&](int64_t microbatches) {
      spec.pipeline.microbatches = microbatches;
      const auto program = schedule::job_program(spec);
      return schedule::estimate_memory(spec, plan::make_layout(spec, &program.stage_to_rank), program);
    };
    const auto plan = planned(m);
    const auto plan_64 = planned(64);
    const auto run = run_job(spec_path, {});
    INFO(run.output);
    REQUIRE(run.result.exit_code == 0);
    static const std::regex line(R"(\[rank (\d)\][^\n]*at most (\d+) send\(s\) in flight)");
    int ranks = 0;
    for (auto it = std::sregex_iterator(run.output.begin(), run.output.end(), line); it != std::sregex_iterator(); ++it) {
      const auto rank = static_cast<size_t>(std::stoll((*it)[1]));
      const int64_t sends = std::stoll((*it)[2]);
      INFO("m " << m << ", rank " << rank << ": " << sends << " sends in flight, the plan's buffers "
                << plan.at(rank).buffers << " (at m = 64: " << plan_64.at(rank).buffers << ")");
      CHECK(sends >= 1);
      CHECK(sends <= plan.at(rank).buffers);
      if (m == 32) CHECK(plan.at(rank).buffers == plan_64.at(rank).buffers);
      ++ranks;
    }
    CHECK(ranks == 4);
  }
}
