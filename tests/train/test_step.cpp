// The training step around the schedule: LR schedule (unit and end to end, once per optimizer step
// whatever m is), global-norm clipping against the unpipelined oracle, loss accounting over the
// microbatch split and the stage split, and the non-finite policy (stop / skip) with injected NaNs.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)
#include <catch2/catch_approx.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <ATen/Parallel.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>

#include "config/load.hpp"
#include "core/error.hpp"
#include "job/local_job.hpp"
#include "support/memory_spec.hpp"
#include "plan/layout.hpp"
#include "schedule/job_program.hpp"
#include "schedule/memory_plan.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_job.hpp"
#include "train/fault_injection.hpp"
#include "optim/grad_norm.hpp"
#include "optim/lr_schedule.hpp"
#include "train/oracle.hpp"

namespace fs = std::filesystem;
using namespace ppctl;
using namespace ppctl::test;
using Catch::Approx;

namespace {

/// Runs one pipelined step with --dump-gradients; returns the folder of the dumps.
fs::path dump_step(const fs::path& spec_path) {
  const auto dump = spec_path.parent_path() / "dump";
  fs::create_directories(dump);
  const auto run = run_job(spec_path, {"--dump-gradients", dump.string()});
  INFO(run.output);
  REQUIRE(run.result.exit_code == 0);
  return dump;
}

double scalar(const train::GradientMap& map, const std::string& key) {
  const auto it = map.find(key);
  REQUIRE(it != map.end());
  return it->second.item<double>();
}

/// Every row (each parameter's gradient, the loss, the norm) within `tolerance`, none vacuous.
void check_close(const train::GradientMap& a, const train::GradientMap& b, double tolerance) {
  // + the last stage's copy of a tied embedding (compared with the shared weight as its own row).
  const size_t copies = a.count("lm_head.weight") && !b.count("lm_head.weight") ? 1 : 0;
  REQUIRE(a.size() == b.size() + copies);
  for (const auto& row : train::compare_gradients(a, b)) {
    INFO(row.name);
    CHECK(row.reference_max_abs > 0.0);
    CHECK(row.max_relative_difference <= tolerance);
  }
}

/// Rewrites the tiny job's `schedule: 1f1b` in `spec_path` as `schedule: SCHEDULE` (which may add keys,
/// e.g. "zbv, virtual_stages: 2"); returns the path.
fs::path with_schedule(const fs::path& spec_path, const std::string& schedule) {
  return edit_spec(spec_path, "schedule: 1f1b", "schedule: " + schedule);
}

/// True when this process has no child left (every worker was reaped).
bool no_children_left() {
  errno = 0;
  return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

}  // namespace

TEST_CASE("learning-rate schedule: warmup, decay endpoints, floor, monotonic") {
  config::OptimizerSpec spec;
  spec.lr = 1e-3;
  spec.min_lr = 1e-4;
  spec.warmup_steps = 4;
  const int64_t steps = 20;
  const auto lr = [&](int64_t k) { return optim::learning_rate(spec, k, steps); };
  const auto schedule = GENERATE(config::LrSchedule::Constant, config::LrSchedule::Cosine,
                                 config::LrSchedule::Linear);
  spec.lr_schedule = schedule;
  INFO(static_cast<int>(schedule));

  // Warmup: lr * (k + 1) / W, reaching lr at the last warmup step (Megatron counts steps from 1).
  CHECK(lr(0) == Approx(0.25e-3));
  CHECK(lr(1) == Approx(0.5e-3));
  CHECK(lr(3) == Approx(1e-3));
  for (int64_t k = 4; k < steps + 5; ++k) {
    CHECK(lr(k) <= lr(k - 1) + 1e-15);    // non-increasing after warmup
    CHECK(lr(k) >= spec.min_lr - 1e-15);  // never below the floor
  }
  if (schedule == config::LrSchedule::Constant) {
    CHECK(lr(4) == 1e-3);
    CHECK(lr(steps - 1) == 1e-3);
    CHECK(lr(steps + 5) == 1e-3);
  } else {
    CHECK(lr(4) < 1e-3);                         // the first decayed step is below the peak ...
    CHECK(lr(4) >= 1e-3 - 0.9e-3 / 16 - 1e-15);  // ... by at most one step's worth (16 decay steps)
    CHECK(lr(11) ==
          Approx(0.55e-3));  // half-way (progress (11 + 1 - 4) / 16): the mean of lr and min_lr
    CHECK(lr(steps - 1) == Approx(1e-4));  // the floor at the last step, and after it
    CHECK(lr(steps + 5) == Approx(1e-4));
  }
  if (schedule == config::LrSchedule::Linear) {
    CHECK(lr(6) - lr(7) == Approx(lr(14) - lr(15)));  // equal decrements
  }
  if (schedule == config::LrSchedule::Cosine) {
    CHECK(lr(7) == Approx(1e-4 + 0.9e-3 * 0.5 * (1 + std::cos(M_PI * 4.0 / 16.0))));
  }
}

TEST_CASE("learning-rate schedule edge cases") {
  config::OptimizerSpec spec;
  spec.lr = 2.0;
  spec.min_lr = 0.5;
  spec.lr_schedule = config::LrSchedule::Cosine;
  // No warmup: decay starts at once (Megatron: progress 1/N at the first step).
  CHECK(optim::learning_rate(spec, 0, 4) == Approx(0.5 + 1.5 * 0.5 * (1 + std::cos(M_PI / 4))));
  // A warmup longer than the run never reaches lr.
  spec.warmup_steps = 10;
  CHECK(optim::learning_rate(spec, 4, 5) == Approx(1.0));
  // One step after warmup: it is the last, at the floor.
  CHECK(optim::learning_rate(spec, 9, 11) == Approx(2.0));
  CHECK(optim::learning_rate(spec, 10, 11) == Approx(0.5));
  // min_lr = lr: constant after warmup.
  spec.min_lr = 2.0;
  CHECK(optim::learning_rate(spec, 12, 20) == Approx(2.0));
}

TEST_CASE("the learning rate is set once per optimizer step, whatever the number of microbatches") {
  const int64_t m = GENERATE(1, 4, 16);
  const Job job{
      2, m, 1, 8, ", lr_schedule: cosine, warmup_steps: 3, min_lr: 0.0001", ", log_interval: 1"};
  const auto spec_path = make_job(job, fresh_dir(fmt::format("lr_m{}", m)));
  const auto spec = config::load_job_spec(spec_path.string());
  const auto run = run_job(spec_path, {});
  INFO("m = " << m << "\n" << run.output);
  REQUIRE(run.result.exit_code == 0);
  const auto steps = logged_steps(run.output);
  REQUIRE(steps.size() == 8);
  for (const auto& [s, logged] : steps) {
    INFO("step " << s);
    // The optimizer's rate during step s (logged with 6 significant digits) is schedule(s - 1).
    CHECK(logged.lr == Approx(optim::learning_rate(spec.optimizer, s - 1, 8)).epsilon(1e-5));
    CHECK(std::isfinite(logged.grad_norm));
    CHECK(!logged.skipped);
  }
}

TEST_CASE(
    "the global gradient norm is the same on every rank, equals the unpipelined norm, and "
    "clipped gradients equal the unpipelined clipped gradients") {
  at::set_num_threads(1);
  const int64_t stages = GENERATE(2, 4);
  const double max_norm = 0.1;
  const Job job{stages, 6, 2, 1, fmt::format(", clip_grad_norm: {}", max_norm)};
  const auto spec_path = make_job(job, fresh_dir(fmt::format("clip_p{}", stages)));
  const auto spec = config::load_job_spec(spec_path.string());
  const auto dir = dump_step(spec_path);

  // Every rank holds the same global norm (bit for bit), before clipping.
  const double norm =
      scalar(train::load_gradient_dump((dir / "rank0.pt").string()), train::kGradNormKey);
  for (int64_t r = 1; r < stages; ++r) {
    const auto dump = train::load_gradient_dump((dir / fmt::format("rank{}.pt", r)).string());
    CHECK(scalar(dump, train::kGradNormKey) == norm);
  }

  auto unclipped_spec = spec;
  unclipped_spec.optimizer.clip_grad_norm = 0.0;
  const auto unclipped = train::reference_gradients(unclipped_spec);
  const auto reference = train::reference_gradients(spec);
  const double reference_norm = scalar(reference, train::kGradNormKey);
  CHECK(std::abs(norm - reference_norm) <= 1e-5 * reference_norm);
  REQUIRE(reference_norm > 2 * max_norm);  // clipping is active

  // The reference is clipped as torch.nn.utils.clip_grad_norm_ does ...
  const double factor = max_norm / (reference_norm + 1e-6);
  const auto name = std::string("block0.fc1.weight");
  CHECK(torch::allclose(reference.at(name), unclipped.at(name) * factor, 1e-6, 0.0));
  // ... and the pipelined gradients, all ranks together, equal it; their norm is now max_norm.
  const auto pipelined = train::load_gradient_dumps(dir.string(), stages);
  check_close(pipelined, reference, 1e-5);
  double clipped_squares = 0.0;
  for (const auto& [key, grad] : pipelined) {
    // Every parameter once: the tied embedding's copy on the last stage is not another parameter.
    if (key.rfind("__", 0) != 0 && reference.count(key))
      clipped_squares += grad.to(torch::kDouble).square().sum().item<double>();
  }
  CHECK(std::sqrt(clipped_squares) == Approx(max_norm).epsilon(1e-5));
}

TEST_CASE(
    "loss accounting: one global batch of 32 as 8 x 4 and as 2 x 16 gives the same gradients") {
  at::set_num_threads(1);
  // Stream indices are consecutive over (microbatch, sequence), so step 0 uses the same 32
  // sequences either way; the loss is scaled by 1/m, so both give the mean over the 32.
  const auto large = make_job({2, 4, 8}, fresh_dir("batch_8x4"));
  const auto small = make_job({2, 16, 2}, fresh_dir("batch_2x16"));
  const auto a = train::load_gradient_dumps(dump_step(large).string(), 2);
  const auto b = train::load_gradient_dumps(dump_step(small).string(), 2);
  check_close(a, b, 1e-5);
  check_close(a, train::reference_gradients(config::load_job_spec(large.string())), 1e-5);
}

TEST_CASE("the loss of a step does not depend on the pipeline split") {
  // The same global batch of 8 sequences (dropout 0): 2 stages x m 2 x 4 and 4 stages x m 4 x 2.
  const auto two = make_job({2, 2, 4}, fresh_dir("split_p2"));
  const auto four = make_job({4, 4, 2}, fresh_dir("split_p4"));
  const auto loss_two =
      scalar(train::load_gradient_dumps(dump_step(two).string(), 2), train::kLossKey);
  const auto loss_four =
      scalar(train::load_gradient_dumps(dump_step(four).string(), 4), train::kLossKey);
  CHECK(std::abs(loss_two - loss_four) <= 1e-6 * std::abs(loss_four));
}

TEST_CASE("ten steps at tensor parallel 2 give the losses of tensor parallel 1") {
  // The same seed, data and dropout masks (dropout sits where every tp rank holds the whole residual stream, or,
  // with sequence parallelism, its part of the sequence and the same part of the whole mask); only the order of
  // additions differs (row-parallel sums of two halves, the vocabulary-parallel loss): losses within 1e-6
  // relative over 10 AdamW steps, read at full precision, with sequence parallelism and without.
  const auto model = GENERATE(std::string(""), std::string(", arch: llama, kv_heads: 2, ffn_hidden: 48"));
  INFO("model keys: " << model);
  std::map<std::string, std::map<int64_t, ppctl::test::LoggedStep>> by_t;
  for (const std::string pipeline : {"", ", tensor_parallel: 2", ", tensor_parallel: 2, sequence_parallel: false"}) {
    ppctl::test::Job job{2, 4, 2, 10};
    job.model = model;
    job.pipeline = pipeline;
    const auto dir = fresh_dir(fmt::format("tp_losses_{}", by_t.size()));
    const auto spec_path = edit_spec(make_job(job, dir), "dropout: 0.0", "dropout: 0.1");
    const auto run = run_job(spec_path, {}, dir / "run");
    INFO(run.output);
    REQUIRE(run.result.exit_code == 0);
    by_t[pipeline] = ppctl::test::metrics_steps(dir / "run");
  }
  const auto& expected_steps = by_t.at("");
  REQUIRE(expected_steps.size() == 10);
  for (const auto& [pipeline, steps] : by_t) {
    INFO("pipeline keys: " << pipeline);
    REQUIRE(steps.size() == 10);
    for (const auto& [step, expected] : expected_steps) {
      INFO("step " << step);
      CHECK(std::abs(steps.at(step).loss - expected.loss) <= 1e-6 * std::abs(expected.loss));
      CHECK(std::abs(steps.at(step).grad_norm - expected.grad_norm) <= 1e-5 * std::abs(expected.grad_norm));
    }
  }
}

/// A 3-step run with on_nonfinite: skip and a NaN injected at step 1: every one of `ranks` ranks warns that
/// step 1 was skipped for non-finite gradients on `where`, and nothing was applied: step 2 starts from the
/// initial weights on every rank (with dp, on every replica: the replicas' weights are equal), so its loss is
/// the unpipelined loss of step 2's global batch on the initial model (logged to 4 decimals). Had one replica
/// taken step 1 alone, its share of the batch would be scored by other weights.
static void check_step_1_skipped(const fs::path& spec_path, const ppctl::test::Run& run, int ranks, const std::string& where) {
  INFO(run.output);
  REQUIRE(run.result.exit_code == 0);
  for (int rank = 0; rank < ranks; ++rank) {
    INFO("rank " << rank);
    CHECK(run.output.find(fmt::format("[rank {}] warning: step 1/3: non-finite gradients on {}: optimizer step skipped",
                                      rank, where)) != std::string::npos);
    CHECK(run.output.find(fmt::format("[rank {}] warning: 1 of 3 optimizer steps skipped", rank)) !=
          std::string::npos);
  }
  const auto steps = logged_steps(run.output);
  REQUIRE(steps.size() == 3);
  CHECK(steps.at(1).skipped);
  CHECK(!steps.at(2).skipped);
  CHECK(!steps.at(3).skipped);
  const auto reference = train::reference_gradients(config::load_job_spec(spec_path.string()), 1);
  CHECK(std::abs(steps.at(2).loss - scalar(reference, train::kLossKey)) <= 6e-5);
  CHECK(std::isfinite(steps.at(3).loss));
}

TEST_CASE(
    "a NaN gradient with on_nonfinite: stop ends the job at once, naming the stage and step") {
  const auto spec_path = make_job({3, 3, 1, 5}, fresh_dir("nan_stop"));
  const auto run = run_job(spec_path, {"--inject-nan", "1:2"});
  INFO(run.output);
  CHECK(run.result.exit_code != 0);
  CHECK(run.output.find("step 2: non-finite gradients on stage 1 (fix: lower optimizer.lr, enable "
                        "optimizer.clip_grad_norm, or set train.on_nonfinite: skip)") !=
        std::string::npos);
  CHECK(run.output.find("step 2/5 | loss") == std::string::npos);  // no optimizer step was taken
  CHECK(run.seconds < 30.0);  // far below comm_timeout_s (60): nobody waited for a peer
  CHECK(no_children_left());
}

TEST_CASE("a NaN gradient with on_nonfinite: skip skips the step on every rank and goes on") {
  at::set_num_threads(1);
  const auto spec_path =
      make_job({3, 3, 1, 3, "", ", on_nonfinite: skip, log_interval: 1"}, fresh_dir("nan_skip"));
  check_step_1_skipped(spec_path, run_job(spec_path, {"--inject-nan", "1:1"}), 3, "stage 1");
}

// A value that turns non-finite after the data-parallel all-reduce on one replica only (issue 12, fault 9):
// the decision is the world's, so every rank of dp 2 x pp 2 skips (or stops) alike and the replicas keep
// equal weights.
static ppctl::test::Job dp2_pp2_job(int64_t steps, const std::string& train) {
  ppctl::test::Job job{2, 2, 2, steps, "", train};
  job.pipeline = ", data_parallel: 2";
  return job;
}

TEST_CASE("a NaN on one dp replica with on_nonfinite: skip skips the step on every rank of both replicas") {
  at::set_num_threads(1);
  const auto spec_path = make_job(dp2_pp2_job(3, ", on_nonfinite: skip, log_interval: 1"), fresh_dir("nan_dp_skip"));
  // Stage 1 of replica 1 only, at step 1 (global rank = pp x 2 + dp: replica 0 = {0, 2}, replica 1 = {1, 3}).
  check_step_1_skipped(spec_path, run_job(spec_path, {"--inject-nan", "1:1:1"}), 4, "stage 1 (dp replica 1)");
}

TEST_CASE("a NaN on one tp rank with on_nonfinite: skip skips the step on every rank of tp 2 x pp 2") {
  // The flags are summed over the tp group with the norm (train/loop.cpp): tp rank 1 of stage 1 alone holds the
  // poisoned shard, yet all four ranks skip, and step 2 starts from the initial weights on every one of them.
  at::set_num_threads(1);
  ppctl::test::Job job{2, 2, 2, 3, "", ", on_nonfinite: skip, log_interval: 1"};
  job.pipeline = ", tensor_parallel: 2";
  const auto spec_path = make_job(job, fresh_dir("nan_tp_skip"));
  // Global rank = pp x 2 + tp (dp 1): stage 1 is ranks 2 (tp rank 0) and 3 (tp rank 1).
  const auto run = run_job(spec_path, {"--inject-nan", "1:1:0:1"});
  CHECK(run.output.find("[rank 3] warning: fault injection: NaN written into the gradient of stage 1") !=
        std::string::npos);
  CHECK(run.output.find("[rank 2] warning: fault injection") == std::string::npos);
  check_step_1_skipped(spec_path, run, 4, "stage 1");
  // The end-of-run memory line says whose pipeline it measured and who else runs its stages.
  CHECK(run.output.find("[rank 2] info: peak memory of tp rank 0 of replica 0's pipeline, global ranks 0, 2") !=
        std::string::npos);
}

TEST_CASE("a NaN on one dp replica with on_nonfinite: stop stops every rank of both replicas cleanly") {
  const auto spec_path = make_job(dp2_pp2_job(5, ""), fresh_dir("nan_dp_stop"));
  const auto run = run_job(spec_path, {"--inject-nan", "1:2:1"});
  INFO(run.output);
  CHECK(run.result.exit_code != 0);
  // Every rank decides to stop at once; the launcher then stops the rest, so one rank of each replica at
  // least has printed the decision (before the fix replica 0 never did: it went on into step 3).
  const auto stopped = [&](int rank) {
    return run.output.find(fmt::format("[rank {}] error: step 2: non-finite gradients on stage 1 (dp replica 1) "
                                       "(fix: lower optimizer.lr",
                                       rank)) != std::string::npos;
  };
  CHECK((stopped(0) || stopped(2)));  // replica 0
  CHECK((stopped(1) || stopped(3)));  // replica 1
  CHECK(run.output.find("Connection closed by peer") == std::string::npos);
  CHECK(run.output.find("step 2/5 | loss") == std::string::npos);  // no optimizer step was taken
  CHECK(run.seconds < 30.0);  // far below comm_timeout_s (60): nobody waited for a peer
  CHECK(no_children_left());
}

TEST_CASE("the worker option --inject-nan takes STAGE:STEP[:REPLICA[:TP_RANK]]") {
  const auto parsed = train::parse_nan_injection("2:12");
  CHECK(parsed.stage == 2);
  CHECK(parsed.step == 12);
  CHECK_FALSE(parsed.replica.has_value());
  const auto on_one = train::parse_nan_injection("1:3:1");
  CHECK(on_one.stage == 1);
  CHECK(on_one.step == 3);
  CHECK(on_one.replica.value_or(-1) == 1);
  CHECK_FALSE(on_one.tp_rank.has_value());
  const auto on_tp_rank = train::parse_nan_injection("1:3:0:1");
  CHECK(on_tp_rank.replica.value_or(-1) == 0);
  CHECK(on_tp_rank.tp_rank.value_or(-1) == 1);
  for (const std::string bad : {"", "1", "1:", ":3", "a:3", "1:0", "-1:2", "1:2:", "1:2:x", "1:2:3:", "1:2:3:x",
                                "1:2:3:4:5", "1: 2", "1:2::1"}) {
    INFO(bad);
    CHECK_THROWS_AS(train::parse_nan_injection(bad), Error);
  }
}

TEST_CASE("gradient statistics: norm, non-finite stages, clip factor") {
  optim::GradientStats stats{{1.0, 4.0, 4.0}, {0.0, 0.0, 0.0}};
  CHECK(stats.norm() == 3.0);
  CHECK(stats.finite());
  CHECK(stats.describe_nonfinite().empty());
  stats.sum_squares[1] = std::nan("");
  stats.loss_nonfinite[2] = 1.0;
  CHECK(!stats.finite());
  CHECK(stats.describe_nonfinite() ==
        "non-finite loss on stage 2 and non-finite gradients on stage 1");
  stats.sum_squares[0] = INFINITY;
  CHECK(stats.describe_nonfinite() ==
        "non-finite loss on stage 2 and non-finite gradients on stages 0, 1");
  // The microbatch of the step whose loss was first non-finite (numbered over every replica), when known.
  stats.loss_microbatch = {0.0, 0.0, 6.0};
  CHECK(stats.describe_nonfinite() ==
        "non-finite loss on stage 2 (first in microbatch 5 of the step) and non-finite gradients on stages 0, 1");
  // local_gradient_stats records it on the stage holding the head, and only with a non-finite loss.
  auto spec = test::memory_test_spec();
  spec.pipeline.stages = 2;
  const auto layout = plan::make_layout(spec);
  const std::vector<model::StageModule> last{model::StageModule(spec.model, layout.stages.back(), 3)};
  auto local = optim::local_gradient_stats(last, 2, std::nan(""), 4, 7);
  CHECK(local.loss_nonfinite == std::vector<double>{0.0, 1.0});
  CHECK(local.loss_microbatch == std::vector<double>{0.0, 8.0});
  local = optim::local_gradient_stats(last, 2, 1.5, 4, 7);
  CHECK(local.loss_microbatch == std::vector<double>{0.0, 0.0});
  CHECK(optim::clip_coefficient(0.5, 1.0) == 1.0);
  CHECK(optim::clip_coefficient(10.0, 1.0) == Approx(1.0 / (10.0 + 1e-6)));
}

TEST_CASE("bf16 mixed precision: pipelined gradients equal the unpipelined bf16 gradients") {
  at::set_num_threads(1);
  const std::string model = GENERATE("", ", arch: llama, kv_heads: 2");  // gpt2, then llama
  Job job{2, 4, 2, 1};
  job.runtime = ", precision: bf16, p2p_dtype: fp32";  // float32 between stages: the reference's exact path
  job.model = model;
  const auto spec_path = make_job(job, fresh_dir(model.empty() ? "bf16_p2" : "bf16_p2_llama"));
  const auto spec = config::load_job_spec(spec_path.string());
  const auto pipelined = train::load_gradient_dumps(dump_step(spec_path).string(), 2);
  check_close(pipelined, train::reference_gradients(spec), 1e-5);

  // bf16 was really used: the gradients differ from fp32's, by bf16's rounding only.
  auto fp32 = spec;
  fp32.runtime.precision = config::Precision::Fp32;
  double largest = 0.0;
  for (const auto& row : train::compare_gradients(pipelined, train::reference_gradients(fp32))) {
    largest = std::max(largest, row.max_relative_difference);
  }
  CHECK(largest > 1e-4);
  CHECK(largest < 0.2);
}

TEST_CASE("bf16 parameters at tensor parallel 2: gradients within bf16 rounding of the unsplit reference") {
  // Split over two ranks, a row-parallel product is two bf16 halves summed by the all-reduce where the unsplit
  // reference rounds one bf16 product: the same arithmetic up to bf16 rounding of partial sums, so 1e-5 cannot
  // hold (measured 2.6e-3 to 5.6e-3 on llama under interleaved 1F1B); 2e-2 of the largest |gradient| catches a
  // wrong shard or a missing all-reduce (off by O(1)). The fp32 runs of the same splits meet 1e-5 (test_parity).
  at::set_num_threads(1);
  Job job{2, 4, 2, 1};
  job.model = ", arch: llama, kv_heads: 2, ffn_hidden: 48, tie_embeddings: true";
  job.pipeline = ", tensor_parallel: 2";
  job.runtime = ", precision: bf16-params";
  const auto spec_path =
      with_schedule(make_job(job, fresh_dir("tp2_bf16params")), "interleaved-1f1b, virtual_stages: 2");
  const auto spec = config::load_job_spec(spec_path.string());
  const auto split = train::load_gradient_dumps(dump_step(spec_path).string(), 4);
  check_close(split, train::reference_gradients(spec), 2e-2);
}

TEST_CASE("bf16 point-to-point: gradients within bf16 rounding of the float32 point-to-point path") {
  // Under precision bf16 the same step runs twice: float32 between stages (equal to the unpipelined
  // oracle, the test above) and bf16 between stages (auto). The bf16 path rounds each activation and
  // gradient crossing ranks to 8 significant bits (relative error <= 2^-9 per element); the stage then
  // works on the rounded tensor, so a weight's gradient moves by a few such roundings of the terms it
  // sums. 2e-2 of the largest |gradient| leaves room for that (measured 5.9e-3 to 7.0e-3 here) and
  // catches a wrong cast or a reinterpreted buffer, which are off by O(1). Exactly (1e-5), the bf16
  // path must equal the oracle that rounds at the same boundaries (train::reference_gradients under
  // p2p bf16; measured 5e-8), which also tells a rounded same-rank hand-off from a plain one. 1f1b
  // over 2 ranks; interleaved (v 2: every boundary crosses ranks); zbv (V placement: stages 1 and 2
  // share rank 1, a local hand-off that is never cast).
  at::set_num_threads(1);
  const std::string schedule = GENERATE("1f1b", "interleaved-1f1b, virtual_stages: 2", "zbv, virtual_stages: 2");
  const std::string name = "bf16p2p_" + schedule.substr(0, schedule.find(','));
  INFO(name);
  Job job{2, 4, 2, 1};
  job.runtime = ", precision: bf16, p2p_dtype: fp32";
  const auto fp32_path = with_schedule(make_job(job, fresh_dir(name + "_fp32")), schedule);
  job.runtime = ", precision: bf16";  // auto: bf16 on the wire
  const auto bf16_path = with_schedule(make_job(job, fresh_dir(name + "_bf16")), schedule);
  const auto fp32 = train::load_gradient_dumps(dump_step(fp32_path).string(), 2);
  const auto bf16 = train::load_gradient_dumps(dump_step(bf16_path).string(), 2);
  check_close(bf16, fp32, 2e-2);
  double largest = 0.0;  // bf16 was really on the wire: the paths differ
  for (const auto& row : train::compare_gradients(bf16, fp32)) largest = std::max(largest, row.max_relative_difference);
  CHECK(largest > 1e-6);
  // ... and equals the unpipelined oracle that rounds where the pipeline sends.
  check_close(bf16, train::reference_gradients(config::load_job_spec(bf16_path.string())), 1e-5);
}

TEST_CASE("bf16 point-to-point halves the bytes each rank sends, as the plan counts them") {
  // Two steps (the timing line covers the steps after the first); each rank logs the bytes it
  // posted for sending per step, which must equal schedule::sent_bytes_per_step for its dtype.
  at::set_num_threads(1);
  const std::string schedule = GENERATE("1f1b", "zbv, virtual_stages: 2");
  INFO(schedule);
  std::map<std::string, std::vector<double>> sent_kib;  // p2p dtype -> per rank, as logged
  for (const std::string dtype : {"fp32", "bf16"}) {
    Job job{2, 4, 2, 2};
    job.runtime = ", precision: bf16, p2p_dtype: " + dtype;
    const auto spec_path = with_schedule(make_job(job, fresh_dir("p2p_bytes_" + dtype)), schedule);
    const auto spec = config::load_job_spec(spec_path.string());
    const auto planned = schedule::sent_bytes_per_step(spec, schedule::job_program(spec));
    const auto run = run_job(spec_path, {});
    INFO(run.output);
    REQUIRE(run.result.exit_code == 0);
    for (int rank = 0; rank < 2; ++rank) {
      std::smatch match;
      const std::regex line("\\[rank " + std::to_string(rank) + "\\][^\\n]*p2p sent ([0-9.]+) KiB per step");
      REQUIRE(std::regex_search(run.output, match, line));
      const double kib = std::stod(match[1]);
      CHECK(kib == Approx(static_cast<double>(planned.at(static_cast<size_t>(rank))) / 1024.0).margin(0.05));
      CHECK(kib > 0.0);
      sent_kib[dtype].push_back(kib);
    }
  }
  for (size_t rank = 0; rank < 2; ++rank) {
    CHECK(sent_kib["bf16"][rank] == Approx(sent_kib["fp32"][rank] / 2.0).margin(0.05));
  }
}
