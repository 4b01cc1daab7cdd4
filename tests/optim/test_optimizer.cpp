// Tests for train/optimizer and train/distributed_optimizer end to end in real worker processes over Gloo.
// The distributed optimizer (optimizer.distributed) against the plain one over 10 steps in every schedule
// family at dp 2 x pp 2 (losses and gradient norms within 1e-6 relative, clipping on), its AdamW state
// (8/dp bytes per parameter but the tied copies), tied copies bitwise equal, and resuming across dp sizes
// with the option on or off. bf16 parameters (runtime.precision bf16-params), replicated and distributed:
// against fp32, their bytes per parameter against Megatron-Core's table, and resuming from fp32 mains.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)
#include <catch2/generators/catch_generators.hpp>
#include <catch2/generators/catch_generators_range.hpp>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "config/load.hpp"
#include "core/atomic_file.hpp"
#include "plan/layout.hpp"
#include "schedule/job_program.hpp"
#include "schedule/memory_plan.hpp"
#include "support/tiny_job.hpp"

namespace fs = std::filesystem;
using namespace ppctl;
using namespace ppctl::test;

namespace {

/// The `AdamW state on this rank: B bytes for P parameters` lines: (bytes, parameters) by global rank.
/// (The same lines also give weights, gradient buffers and fp32 main parameters: static_bytes below.)
std::map<int, std::pair<int64_t, int64_t>> state_bytes(const std::string& output) {
  static const std::regex line(R"(\[rank (\d+)\][^\n]*AdamW state on this rank: (\d+) bytes for (\d+) parameters)");
  std::map<int, std::pair<int64_t, int64_t>> bytes;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    bytes[std::stoi((*it)[1])] = {std::stoll((*it)[2]), std::stoll((*it)[3])};
  }
  return bytes;
}

/// What a rank's training state holds, from its `AdamW state on this rank` line.
struct StateBytes {
  int64_t parameters = 0, adamw = 0, weights = 0, gradients = 0, mains = 0;
  int64_t total() const { return adamw + weights + gradients + mains; }
};

/// Those lines in full, by global rank.
std::map<int, StateBytes> static_bytes(const std::string& output) {
  static const std::regex line(
      R"(\[rank (\d+)\][^\n]*AdamW state on this rank: (\d+) bytes for (\d+) parameters[^;\n]*; weights (\d+) bytes, )"
      R"(gradient buffers (\d+) bytes, fp32 main parameters (\d+) bytes)");
  std::map<int, StateBytes> bytes;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    bytes[std::stoi((*it)[1])] = {std::stoll((*it)[3]), std::stoll((*it)[2]), std::stoll((*it)[4]),
                                  std::stoll((*it)[5]), std::stoll((*it)[6])};
  }
  return bytes;
}

/// Each rank's executor counters, `tensors held between actions up to H MiB, peak P MiB`, as "H / P" by global rank.
std::map<int, std::string> step_memory(const std::string& output) {
  static const std::regex line(
      R"(\[rank (\d+)\][^\n]*tensors held between actions up to ([\d.]+) MiB, peak ([\d.]+) MiB above)");
  std::map<int, std::string> memory;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    memory[std::stoi((*it)[1])] = std::string((*it)[2]) + " / " + std::string((*it)[3]);
  }
  return memory;
}

/// Each rank's `forwards waited W ms for the parameter all-gather` (its timing line), by global rank.
std::map<int, double> gather_waits(const std::string& output) {
  static const std::regex line(R"(\[rank (\d+)\][^\n]*forwards waited ([\d.]+) ms for the parameter all-gather)");
  std::map<int, double> waits;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it) {
    waits[std::stoi((*it)[1])] = std::stod((*it)[2]);
  }
  return waits;
}

double relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-30); }

/// Checks the logged steps `from`..`to` of `run` against `reference`'s within `tolerance` relative.
void check_steps(const std::map<int64_t, LoggedStep>& run, const std::map<int64_t, LoggedStep>& reference,
                 int64_t from, int64_t to, double tolerance) {
  for (int64_t step = from; step <= to; ++step) {
    INFO("step " << step);
    REQUIRE(run.count(step) == 1);
    REQUIRE(reference.count(step) == 1);
    CHECK(relative(run.at(step).loss, reference.at(step).loss) <= tolerance);
    CHECK(relative(run.at(step).grad_norm, reference.at(step).grad_norm) <= tolerance);
  }
}

/// The 10-step dp 2 x pp 2 job the comparisons below run, in `schedule`, with clipping at 0.05 and more
/// optimizer and runtime keys (each starting with ", "); returns its spec's path.
fs::path comparison_job(const fs::path& dir, const std::string& schedule, const std::string& optimizer,
                        const std::string& runtime) {
  Job job{2, 4, 2, 10};
  job.pipeline = ", data_parallel: 2";
  job.optimizer = ", clip_grad_norm: 0.05" + optimizer;
  job.runtime = runtime;
  job.train = ", log_interval: 1";
  return edit_spec(make_job(job, dir), "schedule: 1f1b", "schedule: " + schedule);
}

/// ppctl plan's memory table for `spec`, one row per pipeline rank.
std::vector<schedule::RankMemory> planned_memory(const config::JobSpec& spec) {
  const auto program = schedule::job_program(spec);
  return schedule::estimate_memory(spec, plan::make_layout(spec, &program.stage_to_rank), program);
}

}  // namespace

TEST_CASE("the distributed optimizer trains as the plain one: every family at dp 2 x pp 2, a quarter of the state") {
  // 10 steps each way, clipping on (the global norm spans the shards), small buckets (several per stage,
  // so shards cut parameters and buckets are padded). The weights follow the same arithmetic either way:
  // AdamW is element-wise, the reduce-scatter sums what the all-reduce sums; only the gradient norm's
  // fp64 sum is taken in other pieces, which moves the clip factor in its last bits.
  at::set_num_threads(1);
  const std::string schedule = GENERATE(from_range(kScheduleFamilies));
  const std::string name = schedule.substr(0, schedule.find(','));
  INFO(name);
  std::map<bool, std::map<int64_t, LoggedStep>> logged;
  std::map<bool, std::map<int, std::pair<int64_t, int64_t>>> bytes;
  int64_t tied_numel = 0;
  std::map<bool, std::vector<schedule::RankMemory>> planned;  // ppctl plan's memory table, per pipeline rank
  std::map<bool, std::vector<std::string>> hashes;

  // The parameter all-gather overlapped with the next step's start (the default) and waited for right after
  // AdamW: the same bits. Checked on two families (one stage per rank, and two).
  const bool both_gathers = name == "1f1b" || name == "interleaved-1f1b";
  std::map<int64_t, LoggedStep> gathered_at_once;
  std::vector<std::string> hashes_at_once;
  for (const int mode : {0, 1, 2}) {  // plain, distributed, distributed with overlap_param_gather false
    if (mode == 2 && !both_gathers) continue;
    const bool distributed = mode > 0;
    const auto dir = fresh_dir(fmt::format("distopt_{}_{}", name, mode));
    const auto spec_path =
        comparison_job(dir, schedule, fmt::format(", distributed: {}", distributed),
                       fmt::format(", grad_bucket_size: 3001, overlap_param_gather: {}", mode != 2));
    const auto spec = config::load_job_spec(spec_path.string());
    REQUIRE(spec.model.tie_embeddings);
    tied_numel = spec.model.vocab_size * spec.model.hidden;
    planned[distributed] = planned_memory(spec);
    const auto run = run_job(spec_path, {}, dir / "run");
    INFO(run.output);
    REQUIRE(run.result.exit_code == 0);
    if (mode == 2) {
      gathered_at_once = metrics_steps(dir / "run");
      hashes_at_once = tied_hashes(run.output);
      // Waited for in the optimizer step, the all-gather is never in flight when a forward starts.
      const auto waits = gather_waits(run.output);
      REQUIRE(waits.size() == 4);
      for (const auto& [rank, ms] : waits) CHECK(ms == 0.0);
      continue;
    }
    logged[distributed] = metrics_steps(dir / "run");  // full precision
    REQUIRE(logged[distributed].size() == 10);
    bytes[distributed] = state_bytes(run.output);
    REQUIRE(gather_waits(run.output).size() == 4);  // every rank times its forwards' wait for the all-gather

    REQUIRE(bytes[distributed].size() == 4);
    hashes[distributed] = tied_hashes(run.output);
    REQUIRE(hashes[distributed].size() == 4);  // 2 copies x 2 replicas: weights and moments bitwise equal
    CHECK(std::set<std::string>(hashes[distributed].begin(), hashes[distributed].end()).size() == 1);
  }
  check_steps(logged[true], logged[false], 1, 10, 1e-6);
  if (both_gathers) {
    REQUIRE(gathered_at_once.size() == 10);
    for (const auto& [step, line] : logged[true]) {
      CHECK(line.loss == gathered_at_once.at(step).loss);
      CHECK(line.grad_norm == gathered_at_once.at(step).grad_norm);
    }
    CHECK(hashes_at_once == hashes[true]);
  }
  // Global ranks: pipeline rank r of replica d is r * dp + d (the pipeline rank outermost). Plain: 8 B per
  // parameter on every rank. Distributed: the replicas of a pipeline rank split the moments of its untied
  // parameters between them, exactly once, and each keeps the whole moments of the tied copies it holds
  // (one per pipeline rank, or both on rank 0 under zbv's V placement).
  int64_t copies_held = 0;
  for (const int r : {0, 1}) {
    INFO("pipeline rank " << r);
    const auto plain = bytes[false].at(2 * r);
    CHECK(bytes[false].at(2 * r + 1) == plain);
    CHECK(plain.first == 8 * plain.second);
    const auto first = bytes[true].at(2 * r), second = bytes[true].at(2 * r + 1);
    CHECK(first.second == plain.second);
    const int64_t extra = first.first + second.first - plain.first;  // the tied copies' moments, counted twice
    CHECK(extra % (8 * tied_numel) == 0);
    const int64_t copies = extra / (8 * tied_numel);
    copies_held += copies;
    const int64_t untied = plain.second - copies * tied_numel;
    for (const auto& replica : {first, second}) {  // 8/dp B per untied parameter, give or take a bucket's padding
      CHECK(std::abs(static_cast<double>(replica.first - 8 * copies * tied_numel) - 4.0 * static_cast<double>(untied)) <=
            8.0 * 2);
      // What `ppctl plan` prints in its AdamW column, in each mode.
      CHECK(std::abs(replica.first - planned[true].at(static_cast<size_t>(r)).fixed.optimizer) <= 8 * 2);
    }
    CHECK(planned[false].at(static_cast<size_t>(r)).fixed.optimizer == plain.first);
  }
  CHECK(copies_held == 2);
}

TEST_CASE("the sharded reduction holds no copy of the gradients: a step's memory as without the option") {
  // Reduce-scatter and all-gather run in place. ProcessGroupGloo's own _reduce_scatter_base clones each
  // bucket first: 4 B per parameter more at REDUCE_GRAD (about 3.4 MiB a rank here, in the executor's
  // count of tensors held between actions), which the option exists to save.
  at::set_num_threads(1);
  std::map<bool, std::map<int, std::string>> memory;
  for (const bool distributed : {false, true}) {
    const auto dir = fresh_dir(fmt::format("distopt_memory_{}", distributed));
    Job job{2, 2, 1, 2};
    job.pipeline = ", data_parallel: 2";
    job.optimizer = fmt::format(", distributed: {}", distributed);
    const auto spec_path = edit_spec(make_job(job, dir), "hidden: 32", "hidden: 128");
    const auto run = run_job(spec_path, {});
    INFO(run.output);
    REQUIRE(run.result.exit_code == 0);
    memory[distributed] = step_memory(run.output);
    REQUIRE(memory[distributed].size() == 4);
  }
  CHECK(memory[true] == memory[false]);
}

TEST_CASE("a distributed optimizer's checkpoint resumes at another dp size, and with the option off or on") {
  // The checkpoint holds whole AdamW moments (gathered at save): dp 2 distributed, saved after step 2,
  // continues as the uninterrupted run at dp 1 (the option has nothing to shard: a note), at dp 4 and with
  // the option off; a plain dp 1 checkpoint continues under the distributed optimizer at dp 2. The global
  // batch stays 16 sequences; dp sizes sum the replicas' gradients in other orders (1e-5 relative).
  at::set_num_threads(1);
  const auto spec_for = [](const fs::path& dir, int64_t dp, bool distributed, int64_t steps) {
    Job job{2, 8 / dp, 2, steps};
    job.pipeline = fmt::format(", data_parallel: {}", dp);
    job.optimizer = fmt::format(", distributed: {}", distributed);
    job.runtime = ", grad_bucket_size: 2999";
    job.train = ", log_interval: 1";
    job.sections = "checkpoint: {dir: ckpt, interval: 2}\n";
    return make_job(job, dir);
  };
  const auto base_dir = fresh_dir("distopt_resume_base");
  const auto base = run_job(spec_for(base_dir, 2, true, 4), {}, base_dir / "run");
  INFO(base.output);
  REQUIRE(base.result.exit_code == 0);
  const auto whole = metrics_steps(base_dir / "run");
  const auto saved = base_dir / "ckpt" / "step-00000002";
  REQUIRE(fs::exists(saved));
  struct Resume {
    int64_t dp;
    bool distributed;
    double tolerance;
  };
  for (const auto& resume : {Resume{1, true, 1e-5}, Resume{4, true, 1e-5}, Resume{2, false, 1e-6}}) {
    INFO("resumed at dp " << resume.dp << ", distributed " << resume.distributed);
    const auto dir = fresh_dir(fmt::format("distopt_resume_dp{}_{}", resume.dp, resume.distributed));
    const auto run = run_job(spec_for(dir, resume.dp, resume.distributed, 4), {"--resume", saved.string()}, dir / "run");
    INFO(run.output);
    REQUIRE(run.result.exit_code == 0);
    CHECK(run.output.find("after step 2") != std::string::npos);
    if (resume.dp == 1) CHECK(run.output.find("with dp 1 there is nothing to shard") != std::string::npos);
    const auto steps = metrics_steps(dir / "run");
    CHECK(steps.count(2) == 0);
    check_steps(steps, whole, 3, 4, resume.tolerance);
  }
  // And on: a plain dp 1 run's checkpoint continued by the distributed optimizer at dp 2.
  const auto plain_dir = fresh_dir("distopt_resume_plain");
  const auto plain = run_job(spec_for(plain_dir, 1, false, 4), {}, plain_dir / "run");
  REQUIRE(plain.result.exit_code == 0);
  const auto dir = fresh_dir("distopt_resume_on");
  const auto run =
      run_job(spec_for(dir, 2, true, 4), {"--resume", (plain_dir / "ckpt" / "step-00000002").string()}, dir / "run");
  INFO(run.output);
  REQUIRE(run.result.exit_code == 0);
  check_steps(metrics_steps(dir / "run"), metrics_steps(plain_dir / "run"), 3, 4, 1e-5);
}

TEST_CASE("bf16 parameters: Megatron's bytes per parameter, losses within bf16 rounding of fp32, sharding exact") {
  // runtime.precision bf16-params at dp 2 x pp 2 for 10 steps, clipping on: bf16 weights, fp32 gradient
  // buffers, fp32 main parameters and moments, replicated (18 B per parameter) and sharded over dp 2
  // (6 + 12/2). The two bf16 runs do the same arithmetic (AdamW element-wise on the fp32 mains, the same
  // rounding into bf16), so their losses agree within 1e-6 as fp32's two optimizers do. Against the fp32
  // run the weights are bf16-rounded copies of the mains: measured at most 1.5e-4 relative over the 10 steps
  // in both families (loss about 5.5); the test allows 2e-3 and requires a difference of at least 1e-6
  // (bf16 was used).
  at::set_num_threads(1);
  const std::string schedule = GENERATE(std::string("1f1b"), std::string("zbv, virtual_stages: 2"));
  const std::string name = schedule.substr(0, schedule.find(','));
  INFO(name);
  struct Mode {
    std::string precision;
    bool distributed;
  };
  std::map<std::string, std::map<int64_t, LoggedStep>> logged;
  std::map<std::string, std::map<int, StateBytes>> bytes;
  std::map<std::string, std::vector<schedule::RankMemory>> planned;
  int64_t tied_numel = 0;
  for (const auto& mode : {Mode{"fp32", false}, Mode{"bf16-params", false}, Mode{"bf16-params", true}}) {
    const auto key = fmt::format("{}{}", mode.precision, mode.distributed ? " distributed" : "");
    INFO(key);
    const auto dir = fresh_dir(fmt::format("bf16params_{}_{}_{}", name, mode.precision, mode.distributed));
    const auto spec_path = comparison_job(dir, schedule, fmt::format(", distributed: {}", mode.distributed),
                                          fmt::format(", grad_bucket_size: 3001, precision: {}", mode.precision));
    const auto spec = config::load_job_spec(spec_path.string());
    tied_numel = spec.model.vocab_size * spec.model.hidden;
    planned[key] = planned_memory(spec);
    const auto run = run_job(spec_path, {}, dir / "run");
    INFO(run.output);
    REQUIRE(run.result.exit_code == 0);
    logged[key] = metrics_steps(dir / "run");
    REQUIRE(logged[key].size() == 10);
    bytes[key] = static_bytes(run.output);
    REQUIRE(bytes[key].size() == 4);
    const auto hashes = tied_hashes(run.output);
    REQUIRE(hashes.size() == 4);  // 2 copies x 2 replicas: weights and moments bitwise equal
    CHECK(std::set<std::string>(hashes.begin(), hashes.end()).size() == 1);
  }
  check_steps(logged["bf16-params distributed"], logged["bf16-params"], 1, 10, 1e-6);
  double largest = 0.0;
  for (const auto& [step, line] : logged["bf16-params"]) {
    INFO("step " << step);
    CHECK(relative(line.loss, logged["fp32"].at(step).loss) <= 2e-3);
    largest = std::max(largest, relative(line.loss, logged["fp32"].at(step).loss));
  }
  CHECK(largest >= 1e-6);
  // Bytes per parameter, measured on every rank (global rank = pipeline rank x dp + replica), against
  // Megatron-Core's table (docs/source/api-guide/dist_optimizer.md: fp32 16 B, bf16 parameters with fp32
  // gradients 18 B, and 6 + 12/d distributed) and against ppctl plan's static columns.
  for (const int r : {0, 1}) {
    INFO("pipeline rank " << r);
    const auto fp32 = bytes["fp32"].at(2 * r), replicated = bytes["bf16-params"].at(2 * r);
    CHECK(fp32.total() == 16 * fp32.parameters);
    CHECK(replicated.weights == 2 * replicated.parameters);
    CHECK(replicated.gradients == 4 * replicated.parameters);
    CHECK(replicated.mains == 4 * replicated.parameters);
    CHECK(replicated.total() == 18 * replicated.parameters);
    const auto& plan_replicated = planned["bf16-params"].at(static_cast<size_t>(r)).fixed;
    CHECK(plan_replicated.parameters == replicated.weights);
    CHECK(plan_replicated.gradients == replicated.gradients);
    CHECK(plan_replicated.optimizer == replicated.adamw + replicated.mains);
    // Sharded: each replica holds half of the untied parameters' mains and moments (12 B), give or take a
    // bucket's padding, and the tied copies' whole (each pipeline rank holds one copy, or zbv's rank 0 both).
    int64_t sharded_state = 0;
    for (const int d : {0, 1}) {
      const auto replica = bytes["bf16-params distributed"].at(2 * r + d);
      CHECK(replica.weights == 2 * replica.parameters);
      sharded_state += replica.adamw + replica.mains;
      CHECK(std::abs(replica.adamw + replica.mains -
                     planned["bf16-params distributed"].at(static_cast<size_t>(r)).fixed.optimizer) <= 12 * 2);
    }
    const int64_t extra = sharded_state - (replicated.adamw + replicated.mains);  // the tied copies, counted twice
    CHECK(extra % (12 * tied_numel) == 0);
    const int64_t copies = extra / (12 * tied_numel);
    CHECK(copies == (name == "zbv" ? (r == 0 ? 2 : 0) : 1));
    const double per_parameter = static_cast<double>(sharded_state / 2 - 12 * copies * tied_numel) /
                                 static_cast<double>(replicated.parameters - copies * tied_numel);
    CHECK(std::abs(per_parameter - 12.0 / 2) <= 1e-3);  // 6 + 12/d with d = 2: the 12/d part
  }
}

TEST_CASE("bf16 parameters resume from their fp32 main parameters: exactly, at another dp, sharded or not") {
  // The checkpoint holds the fp32 main parameters (not their bf16 rounding) and the whole moments, in the
  // same per-parameter format as fp32 runs. bf16-params sharded over dp 2, saved after step 2 of 4: resumed
  // as it was, the losses equal the uninterrupted run's bitwise; at dp 1 (replicated) within 1e-5 (another
  // summation order of the replicas' gradients). An fp32 checkpoint continues under bf16-params, whose
  // mains are then the fp32 weights: its first step equals the fp32 run's within bf16 rounding (measured
  // 2.3e-5 relative; allowed 2e-3).
  at::set_num_threads(1);
  const auto spec_for = [](const fs::path& dir, int64_t dp, bool distributed, const std::string& precision) {
    Job job{2, 8 / dp, 2, 4};
    job.pipeline = fmt::format(", data_parallel: {}", dp);
    job.optimizer = fmt::format(", distributed: {}", distributed);
    job.runtime = fmt::format(", grad_bucket_size: 2999, precision: {}", precision);
    job.train = ", log_interval: 1";
    job.sections = "checkpoint: {dir: ckpt, interval: 2}\n";
    return make_job(job, dir);
  };
  const auto base_dir = fresh_dir("bf16params_resume_base");
  const auto base = run_job(spec_for(base_dir, 2, true, "bf16-params"), {}, base_dir / "run");
  INFO(base.output);
  REQUIRE(base.result.exit_code == 0);
  const auto whole = metrics_steps(base_dir / "run");
  const auto saved = base_dir / "ckpt" / "step-00000002";
  REQUIRE(fs::exists(saved));
  // The unit files hold fp32 weights that bf16 cannot represent: the mains, not the weights computed with.
  for (const auto& file : {"embedding.pt", "block0.pt", "head.pt"}) {
    INFO(file);
    const auto text = core::read_file(saved / file);
    int64_t unrounded = 0, weights = 0;
    for (const auto& item : torch::pickle_load(std::vector<char>(text.begin(), text.end())).toGenericDict()) {
      if (item.key().toStringRef().rfind("param/", 0) != 0) continue;
      const auto value = item.value().toTensor();
      REQUIRE(value.scalar_type() == torch::kFloat);
      ++weights;
      unrounded += value.ne(value.to(torch::kBFloat16).to(torch::kFloat)).sum().item<int64_t>();
    }
    CHECK(weights > 0);
    CHECK(unrounded > 0);
  }
  struct Resume {
    int64_t dp;
    bool distributed;
    double tolerance;
  };
  for (const auto& resume : {Resume{2, true, 0.0}, Resume{1, false, 1e-5}, Resume{2, false, 1e-5}}) {
    INFO("resumed at dp " << resume.dp << ", distributed " << resume.distributed);
    const auto dir = fresh_dir(fmt::format("bf16params_resume_dp{}_{}", resume.dp, resume.distributed));
    const auto run = run_job(spec_for(dir, resume.dp, resume.distributed, "bf16-params"),
                             {"--resume", saved.string()}, dir / "run");
    INFO(run.output);
    REQUIRE(run.result.exit_code == 0);
    CHECK(run.output.find("after step 2") != std::string::npos);
    const auto steps = metrics_steps(dir / "run");
    CHECK(steps.count(2) == 0);
    check_steps(steps, whole, 3, 4, resume.tolerance);
  }
  const auto fp32_dir = fresh_dir("bf16params_resume_fp32");
  const auto fp32 = run_job(spec_for(fp32_dir, 2, false, "fp32"), {}, fp32_dir / "run");
  REQUIRE(fp32.result.exit_code == 0);
  const auto dir = fresh_dir("bf16params_resume_from_fp32");
  const auto run = run_job(spec_for(dir, 2, true, "bf16-params"),
                           {"--resume", (fp32_dir / "ckpt" / "step-00000002").string()}, dir / "run");
  INFO(run.output);
  REQUIRE(run.result.exit_code == 0);
  const auto steps = metrics_steps(dir / "run");
  REQUIRE(steps.count(3) == 1);
  const auto fp32_steps = metrics_steps(fp32_dir / "run");
  CHECK(relative(steps.at(3).loss, fp32_steps.at(3).loss) <= 2e-3);
  CHECK(steps.at(3).loss != fp32_steps.at(3).loss);
}
