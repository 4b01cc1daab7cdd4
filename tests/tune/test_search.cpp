// Tests of tune/search: the lower bound against the simulator, the search's determinism, its
// memory limit, that a listed configuration's lines give the step it printed under `ppctl plan`'s own path,
// that a zb-auto candidate's pipeline.zb_auto carries its stage costs, B included; and the calibration on
// probe runs: compute_actions, the fit, the ranking by the predicted step; the tensor-parallel collectives' cost
// per candidate and the ranking flipping to a smaller tp as it grows.
#include <catch2/catch_approx.hpp>
#include <fmt/format.h>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cmath>
#include <random>
#include <string>

#include "config/load.hpp"
#include "core/error.hpp"
#include "plan/balance.hpp"
#include "plan/layer_times.hpp"
#include "schedule/generate.hpp"
#include "schedule/job_program.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/split_time.hpp"
#include "support/temp_dir.hpp"
#include "tune/report.hpp"
#include "tune/search.hpp"

using namespace ppctl;
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;

namespace {

const std::string kSpec = R"(model: {vocab_size: 256, layers: 8, hidden: 64, heads: 4, seq_len: 32}
pipeline: {stages: 4, schedule: 1f1b, microbatches: 4, micro_batch_size: 4}
data: {path: corpus.txt}
)";

/// The job of kSpec in `dir`: spec, program and layout as job::prepare_job makes them.
struct Job {
  config::JobSpec spec;
  schedule::Program program;
  plan::Layout layout;
};

Job job_in(const test::TempDir& dir) {
  test::write_checked(dir.path / "corpus.txt", std::string(20000, 'a'));
  Job job;
  job.spec = config::parse_job_spec(kSpec, (dir.path / "job.yaml").string(), dir.path.string());
  job.program = schedule::job_program(job.spec);
  job.layout = schedule::job_layout(job.spec, job.program);
  return job;
}

/// Measured-looking times: blocks of unequal cost, a heavy head.
tune::TuneOptions measured_options() {
  tune::TuneOptions options;
  for (int i = 0; i < 8; ++i) options.times.blocks.push_back({1.0 + 0.25 * (i % 3), 2.1 + 0.5 * (i % 3)});
  options.times.embedding = {0.2, 0.4};
  options.times.head = {3.0, 5.5};
  options.times_source = "test times";
  options.measured = true;
  options.p2p_latency = 0.05;
  return options;
}

tune::TuneResult run(const test::TempDir& dir, const Job& job, const tune::TuneOptions& options) {
  return tune::tune(job.spec, kSpec, dir.path.string(), job.layout, job.program, options);
}

}  // namespace

TEST_CASE("divisors lists every divisor in ascending order") {
  CHECK(tune::divisors(1) == std::vector<int64_t>{1});
  CHECK(tune::divisors(12) == std::vector<int64_t>{1, 2, 3, 4, 6, 12});
  CHECK(tune::divisors(16) == std::vector<int64_t>{1, 2, 4, 8, 16});
  CHECK(tune::divisors(13) == std::vector<int64_t>{1, 13});
}

TEST_CASE("the lower bound never exceeds the simulated step, for every generated kind") {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> cost(0.1, 3.0);
  using config::ScheduleKind;
  const std::pair<ScheduleKind, int64_t> kinds[] = {{ScheduleKind::GPipe, 1}, {ScheduleKind::OneFOneB, 1},
                                                    {ScheduleKind::Interleaved1F1B, 2}, {ScheduleKind::ZBH1, 1},
                                                    {ScheduleKind::ZBV, 2}};
  int checked = 0;
  for (const auto& [kind, v] : kinds) {
    for (int64_t p = 1; p <= 5; ++p) {
      for (int64_t m = 1; m <= 9; ++m) {
        schedule::ScheduleParams params{kind, p, v, m, 0, {}};
        try {
          schedule::check_params(params);
        } catch (const ScheduleError&) {
          continue;
        }
        const auto program = schedule::generate(params);
        schedule::CostModel costs;
        costs.stages.clear();
        for (int64_t s = 0; s < p * v; ++s) {
          const double b = cost(random);
          costs.stages.push_back({cost(random), b, b / 2, b / 2, cost(random) / 4});
        }
        costs.p2p_latency = cost(random) / 10;
        const double bound = tune::lower_bound(program, costs);
        CHECK(bound > 0.0);
        CHECK(bound <= schedule::simulate(program, costs).step_time + 1e-9);
        ++checked;
      }
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("the tuner is deterministic and lists at most five, fastest first") {
  test::TempDir dir;
  const auto job = job_in(dir);
  const auto options = measured_options();
  const auto first = run(dir, job, options);
  const auto second = run(dir, job, options);
  const auto text = tune::format_tune(first, job.spec, options);
  CHECK(text == tune::format_tune(second, job.spec, options));
  REQUIRE(first.top.size() == 5);
  // Fastest first; steps equal to 1e-6 tie and go to the smaller peak memory.
  for (size_t i = 1; i < first.top.size(); ++i) {
    const auto& a = first.top[i - 1];
    const auto& b = first.top[i];
    CHECK(a.step <= b.step + 1e-6);
    if (std::abs(a.step - b.step) < 1e-7) CHECK(a.peak_bytes <= b.peak_bytes);
  }
  // Every candidate is accounted for: ranked, or ruled out with a reason.
  int64_t ruled_out = 0;
  for (const auto& [reason, count] : first.ruled_out) ruled_out += count;
  CHECK(first.ranked + ruled_out == first.candidates);
  // The spec's own 1f1b at m 4 is beaten (more microbatches shrink the bubble).
  REQUIRE(first.own.ranked);
  CHECK(first.own.rank > 1);
  CHECK(first.top.front().step < first.own.step);
  CHECK_THAT(text, ContainsSubstring("the spec's own configuration (1f1b, m 4 x mbs 4"));
}

TEST_CASE("each listed configuration's lines, applied to the spec, give the step the tuner printed") {
  test::TempDir dir;
  const auto job = job_in(dir);
  const auto options = measured_options();
  const auto result = run(dir, job, options);
  REQUIRE(!result.top.empty());
  const tune::SpecEditor editor(kSpec, dir.path.string());
  for (const auto& entry : result.top) {
    // What `ppctl plan --layer-costs` does with the edited spec: its program, its layout, job_cost_model on the
    // times (scaled to the micro batch size: the tuner's assumption, stated in its output).
    const auto spec = editor.apply(entry.changes);
    const auto program = schedule::job_program(spec);
    const auto layout = schedule::job_layout(spec, program);
    const double factor = static_cast<double>(spec.pipeline.micro_batch_size) / job.spec.pipeline.micro_batch_size;
    auto costs = schedule::job_cost_model(spec, layout, tune::scaled(options.times, factor), options.p2p_latency);
    CHECK(schedule::simulate(program, costs).step_time == Approx(entry.step).epsilon(1e-12));
    int64_t peak = 0;
    for (const auto& r : schedule::estimate_memory(spec, layout, program)) peak = std::max(peak, r.total());
    CHECK(peak == entry.peak_bytes);
  }
}

TEST_CASE("the memory limit: every listed configuration fits it, the others are counted, none fitting is said") {
  test::TempDir dir;
  const auto job = job_in(dir);
  auto options = measured_options();
  const auto free = run(dir, job, options);
  REQUIRE(free.top.size() == 5);
  int64_t least = free.top.front().peak_bytes;
  for (const auto& e : free.top) least = std::min(least, e.peak_bytes);
  // Just below the smallest peak of the unlimited top 5: each of those is ruled out (or needs a lever).
  options.memory_gib = (static_cast<double>(least) - 1.0) / (1024.0 * 1024.0 * 1024.0);
  options.memory_source = "test";
  const auto limited = run(dir, job, options);
  for (const auto& e : limited.top) CHECK(static_cast<double>(e.peak_bytes) <= options.memory_gib * 1024 * 1024 * 1024);
  bool counted = false;
  for (const auto& [reason, count] : limited.ruled_out)
    if (reason.find("does not fit") != std::string::npos && count > 0) counted = true;
  CHECK(counted);
  options.memory_gib = 1e-6;  // about a kilobyte: nothing fits
  const auto none = run(dir, job, options);
  CHECK(none.top.empty());
  CHECK_THAT(tune::format_tune(none, job.spec, options), ContainsSubstring("no configuration fits"));
}

TEST_CASE("compute_actions: the most F, B, I and W any rank runs") {
  using config::ScheduleKind;
  CHECK(tune::compute_actions(schedule::generate_compute({ScheduleKind::OneFOneB, 4, 1, 4, 0})) == 8);
  CHECK(tune::compute_actions(schedule::generate_compute({ScheduleKind::ZBH1, 4, 1, 4, 0})) == 12);
  CHECK(tune::compute_actions(schedule::generate_compute({ScheduleKind::Interleaved1F1B, 2, 2, 4, 0})) == 16);
  CHECK(tune::compute_actions(schedule::generate({ScheduleKind::OneFOneB, 2, 1, 3, 0})) == 6);  // transfers not counted
}

TEST_CASE("calibration: fitted on the probes' measured steps, exact at each; the search ranks by the prediction") {
  test::TempDir dir;
  const auto job = job_in(dir);
  auto options = measured_options();
  // Probe a: the spec itself (1f1b, m 4 x mbs 4: 8 compute actions per rank); probe b: m 8 x mbs 2 (16).
  auto other = job.spec;
  other.pipeline.microbatches = 8;
  other.pipeline.micro_batch_size = 2;
  // Each probe's configuration as plain `ppctl plan --layer-costs` simulates it (times scaled to its size).
  const auto simulate = [&](const config::JobSpec& spec) {
    const auto program = schedule::job_program(spec);
    const auto layout = schedule::job_layout(spec, program);
    const double factor = static_cast<double>(spec.pipeline.micro_batch_size) / job.spec.pipeline.micro_batch_size;
    return schedule::simulate(program, schedule::job_cost_model(spec, layout, tune::scaled(options.times, factor),
                                                                options.p2p_latency))
        .step_time;
  };
  const double sim_a = simulate(job.spec);
  const double sim_b = simulate(other);
  CHECK(sim_a == Approx(run(dir, job, measured_options()).own.simulated));
  options.probe_runs = {{"a", job.spec, 2.0 * sim_a}, {"b", other, 2.0 * sim_b}};
  const auto checked = tune::calibrate(job.spec, options);
  REQUIRE(checked.probes.size() == 2);
  CHECK(checked.probes[0].actions == 8);
  CHECK(checked.probes[1].actions == 16);
  CHECK(checked.probes[0].simulated == Approx(sim_a));
  CHECK(checked.probes[1].simulated == Approx(sim_b));

  SECTION("one probe: a constant") {
    options.probe_runs = {{"a", job.spec, sim_a + 10.0}};
    const auto result = run(dir, job, options);
    CHECK(result.calibration.fixed_ms == Approx(10.0));
    CHECK(result.calibration.per_action_ms == 0.0);
    CHECK(result.own.step == Approx(sim_a + 10.0));
    for (const auto& e : result.top) CHECK(e.step == Approx(e.simulated + 10.0));
  }
  SECTION("two probes: fixed + per action, through both; every listed step is its simulated step plus that") {
    options.probe_runs = {{"a", job.spec, sim_a + 10.0 + 0.5 * 8}, {"b", other, sim_b + 10.0 + 0.5 * 16}};
    const auto result = run(dir, job, options);
    CHECK(result.calibration.fixed_ms == Approx(10.0));
    CHECK(result.calibration.per_action_ms == Approx(0.5));
    CHECK(result.calibration.clamped.empty());
    CHECK(result.calibration.least_actions == 8);
    CHECK(result.calibration.at(2) == Approx(14.0));
    CHECK(result.own.step == Approx(sim_a + 14.0));  // the spec is probe a: predicted = measured
    const tune::SpecEditor editor(kSpec, dir.path.string());
    REQUIRE(result.top.size() == 5);
    for (size_t i = 0; i < result.top.size(); ++i) {
      const auto& e = result.top[i];
      const auto program = schedule::job_program(editor.apply(e.changes));
      // Below the fewer of the probes' 8 actions the per-action part is held at 8 (not extrapolated down).
      const auto n = std::max<int64_t>(tune::compute_actions(program), 8);
      CHECK(e.step == Approx(e.simulated + 10.0 + 0.5 * static_cast<double>(n)));
      if (i > 0) CHECK(result.top[i - 1].step <= e.step + 1e-6);
    }
    const auto text = tune::format_tune(result, job.spec, options);
    CHECK_THAT(text, ContainsSubstring("calibrated predicted step = simulated step +10 ms +0.5 ms x the compute actions") &&
                         ContainsSubstring("top 5 by predicted step") &&
                         ContainsSubstring(fmt::format(" 1. step {:.2f}, predicted {:.2f},", result.top[0].simulated,
                                                       result.top[0].step)));
  }
  SECTION("two probes disagreeing (more actions, less left over): no per-action part, the mean, said") {
    options.probe_runs = {{"a", job.spec, sim_a + 10.0}, {"b", other, sim_b + 2.0}};
    const auto result = run(dir, job, options);
    CHECK(result.calibration.per_action_ms == 0.0);
    CHECK(result.calibration.fixed_ms == Approx(6.0));
    CHECK_THAT(tune::format_tune(result, job.spec, options), ContainsSubstring("  clamped the probe with more actions"));
  }
  SECTION("a probe measured under half or over 10 x its simulated step (metrics and trace disagree): left out, said") {
    for (const double factor : {0.4, 10.5, 1e300}) {
      options.probe_runs = {{"a", job.spec, sim_a + 10.0}, {"b", other, factor * sim_b}};
      const auto result = run(dir, job, options);
      REQUIRE(result.calibration.probes.size() == 1);
      CHECK(result.calibration.fixed_ms == Approx(10.0));
      CHECK_THAT(tune::format_tune(result, job.spec, options),
                 ContainsSubstring("  not calibrated on b: its measured step") &&
                     ContainsSubstring("is not within 0.5-10 x its simulated"));
    }
    options.probe_runs = {{"b", other, 0.0}};
    CHECK(!run(dir, job, options).calibration.calibrated());
  }
  SECTION("a probe run directory without a measured step: said with why, before the others") {
    options.probe_runs = {{"a", job.spec, sim_a + 10.0}};
    options.uncalibrated = {"runs/b: it has no metrics.jsonl"};
    const auto result = run(dir, job, options);
    CHECK(result.calibration.fixed_ms == Approx(10.0));
    CHECK_THAT(tune::format_tune(result, job.spec, options),
               ContainsSubstring("  not calibrated on runs/b: it has no metrics.jsonl\n"));
  }
  SECTION("no probe run: the simulated step, said") {
    options.probe_runs.clear();
    const auto result = run(dir, job, options);
    CHECK(!result.calibration.calibrated());
    for (const auto& e : result.top) CHECK(e.step == e.simulated);
    CHECK_THAT(tune::format_tune(result, job.spec, options), ContainsSubstring("calibrated no: no probe run directory"));
  }
}

TEST_CASE("a zb-auto candidate's pipeline.zb_auto gives B (b) beside F, I and W, from the same stage costs") {
  test::TempDir dir;
  const auto job = job_in(dir);
  auto options = measured_options();
  options.top = 20;  // room for the zb-auto candidates placed from the 1f1b and zb-h1 entries
  const auto result = run(dir, job, options);
  const tune::SpecEditor editor(kSpec, dir.path.string());
  int64_t zb_auto = 0;
  for (const auto& entry : result.top) {
    if (entry.knobs.kind != config::ScheduleKind::ZBAuto) continue;
    ++zb_auto;
    const auto spec = editor.apply(entry.changes);
    const auto& z = spec.pipeline.zb_auto;
    // The same stage costs as the candidate's own (job_cost_model on its times): B as well as F, I and W.
    const auto program = schedule::job_program(spec);
    const auto layout = schedule::job_layout(spec, program);
    const double factor = static_cast<double>(spec.pipeline.micro_batch_size) / job.spec.pipeline.micro_batch_size;
    const auto costs = schedule::job_cost_model(spec, layout, tune::scaled(options.times, factor), options.p2p_latency);
    REQUIRE(!z.backward.empty());
    for (size_t s = 0; s < costs.stages.size(); ++s) {
      CAPTURE(s);
      const double b = z.backward[z.backward.size() == 1 ? 0 : s];
      CHECK(b == Approx(costs.stages[s].backward).epsilon(1e-5));
      CHECK(z.forward[z.forward.size() == 1 ? 0 : s] == Approx(costs.stages[s].forward).epsilon(1e-5));
    }
  }
  CHECK(zb_auto > 0);
}

namespace {

/// Llama-3.1-405B on pp 16 x dp 8 without tp, bf16-params, distributed, recompute full, against an H200: its
/// static bytes alone (25e9 parameters a rank) exceed 140.4 GiB.
const std::string k405b = R"(model: {arch: llama, layers: 126, hidden: 16384, heads: 128, kv_heads: 8, ffn_hidden: 53248,
        vocab_size: 128256, seq_len: 8192, tie_embeddings: false}
pipeline: {stages: 16, data_parallel: 8, schedule: 1f1b, micro_batch_size: 1, microbatches: 16}
data: {path: corpus.txt}
optimizer: {distributed: true}
train: {recompute: full}
runtime: {device: cuda, precision: bf16-params, device_memory_gib: 140.4}
)";

}  // namespace

TEST_CASE("the tp sizes searched: the spec's first, then those that divide tp x dp and the model, at most 8") {
  test::TempDir dir;
  auto job = job_in(dir);  // 4 heads, dp 0 (derived at launch): nothing to trade
  CHECK(tune::tensor_parallel_candidates(job.spec) == std::vector<int64_t>{1});
  job.spec.pipeline.data_parallel = 4;
  CHECK(tune::tensor_parallel_candidates(job.spec) == std::vector<int64_t>{1, 2, 4});
  job.spec.pipeline.data_parallel = 3;  // tp x dp = 3: no tp of 4 heads divides it
  CHECK(tune::tensor_parallel_candidates(job.spec) == std::vector<int64_t>{1});
  job.spec.pipeline.data_parallel = 8;
  job.spec.pipeline.tensor_parallel = 2;  // multiples of the spec's tp only, tp x dp = 16 kept
  CHECK(tune::tensor_parallel_candidates(job.spec) == std::vector<int64_t>{2, 4});
}

TEST_CASE("Llama-3.1-405B on pp 16 x dp 8: the tuner fits it only with tp, taken from dp, its collectives costed") {
  test::TempDir dir;
  test::write_checked(dir.path / "corpus.txt", std::string(20000, 'a'));
  const auto spec = config::parse_job_spec(k405b, (dir.path / "job.yaml").string(), dir.path.string());
  const auto program = schedule::job_program(spec);
  const auto layout = schedule::job_layout(spec, program);
  tune::TuneOptions options;
  options.times = plan::layer_times(plan::flop_layer_costs(spec.model), spec.model.layers);
  options.times_source = "FLOP model";
  options.unit = "units";
  options.memory_gib = 140.4;
  options.memory_source = "runtime.device_memory_gib";
  const auto result = tune::tune(spec, k405b, dir.path.string(), layout, program, options);
  REQUIRE(!result.top.empty());
  CHECK(!result.own.fits);
  const tune::SpecEditor editor(k405b, dir.path.string());
  for (const auto& entry : result.top) {
    INFO(tune::describe(entry.knobs));
    REQUIRE(entry.knobs.tensor_parallel > 1);
    CHECK(entry.knobs.tensor_parallel * entry.knobs.data_parallel == 8);  // the spec's ranks
    const auto candidate = editor.apply(entry.changes);
    CHECK(candidate.pipeline.tensor_parallel == entry.knobs.tensor_parallel);
    // The global batch is the spec's: dp x m x micro_batch_size = 8 x 16.
    CHECK(candidate.pipeline.data_parallel * candidate.pipeline.microbatches * candidate.pipeline.micro_batch_size ==
          8 * 16);
    int64_t peak = 0;
    const auto candidate_program = schedule::job_program(candidate);
    for (const auto& r : schedule::estimate_memory(candidate, schedule::job_layout(candidate, candidate_program),
                                                   candidate_program))
      peak = std::max(peak, r.total());
    CHECK(peak == entry.peak_bytes);
    CHECK(static_cast<double>(peak) <= 140.4 * 1024.0 * 1024.0 * 1024.0);
  }
  const auto text = tune::format_tune(result, spec, options);
  CHECK_THAT(text, ContainsSubstring("searched  tp 1, 2, 4, 8 (tp x dp = 8 kept") &&
                       ContainsSubstring("its tp collectives added: `tp comm`") &&
                       ContainsSubstring("tp comm   at the largest tp searched, tp 8 with sequence parallelism: per "
                                         "block and microbatch F 2 all-gathers + 2 reduce-scatters") &&
                       ContainsSubstring(", tp 8 x dp 1\n      pipeline: {") &&
                       ContainsSubstring("tensor_parallel: 8, data_parallel: 1}"));
}

TEST_CASE("tp collectives: free, a larger tp ranks first; costly enough, the smallest tp wins") {
  test::TempDir dir;
  auto job = job_in(dir);
  std::string spec_text = kSpec;
  spec_text.replace(spec_text.find("stages: 4,"), 10, "stages: 4, data_parallel: 4,");
  job.spec = config::parse_job_spec(spec_text, (dir.path / "job.yaml").string(), dir.path.string());
  job.program = schedule::job_program(job.spec);
  job.layout = schedule::job_layout(job.spec, job.program);
  REQUIRE(tune::tensor_parallel_candidates(job.spec) == std::vector<int64_t>{1, 2, 4});
  tune::TuneOptions options;
  options.times = plan::layer_times(plan::flop_layer_costs(job.spec.model), job.spec.model.layers);
  options.times_source = "FLOP model";
  options.unit = "units";
  const auto top_tp = [&](double collective_ms) {
    options.tp_comm.collective_ms = collective_ms;
    options.tp_comm.given_micro_batch_size = job.spec.pipeline.micro_batch_size;
    const auto result = tune::tune(job.spec, spec_text, dir.path.string(), job.layout, job.program, options);
    REQUIRE(!result.top.empty());
    return std::max<int64_t>(result.top.front().knobs.tensor_parallel, 1);  // 0: the spec's own tp, 1
  };
  CHECK(top_tp(0.0) > 1);  // more sequences per replica at the same GPUs: more microbatches, a smaller bubble
  // One block's forward at micro_batch_size 4 on one rank at 400 TFLOP/s: a collective costing 10 of them.
  const double block_ms = plan::forward_ms(job.spec, plan::block_forward_flops(job.spec.model), options.tp_comm);
  CHECK(top_tp(10 * block_ms) == 1);
  // The cost in the FLOP model's unit: the given ms over one block's forward at the spec's tp and micro batch size,
  // in proportion to the candidate's micro batch size, the same at every tp.
  auto candidate = job.spec;
  candidate.pipeline.tensor_parallel = 4;
  candidate.pipeline.micro_batch_size = 2;
  CHECK(tune::tp_all_reduce_cost(options, 4, 1, candidate) == Approx(10.0 / 2));
  candidate.pipeline.tensor_parallel = 1;
  CHECK(tune::tp_all_reduce_cost(options, 4, 1, candidate) == 0.0);
}

TEST_CASE("tp collectives under measured times: only what another tp adds beyond the spec's, unless given") {
  test::TempDir dir;
  auto spec = job_in(dir).spec;
  spec.pipeline.tensor_parallel = 2;
  auto options = measured_options();
  options.tp_comm.bandwidth_gbps = 1.0;
  auto candidate = spec;
  CHECK(tune::tp_all_reduce_cost(options, 4, 2, candidate) == 0.0);  // the spec's own tp: inside the times
  candidate.pipeline.tensor_parallel = 4;
  auto at_two = candidate;
  at_two.pipeline.tensor_parallel = 2;
  // The times, scaled by 2 / 4, hold half of tp 2's: tp 4's ring moves 1.5 x the bytes, tp 2's 1 x.
  CHECK(tune::tp_all_reduce_cost(options, 4, 2, candidate) ==
        Approx(plan::tp_all_reduce_ms(candidate, options.tp_comm) - 0.5 * plan::tp_all_reduce_ms(at_two, options.tp_comm)));
  CHECK(plan::tp_all_reduce_ms(candidate, options.tp_comm) == Approx(1.5 * plan::tp_activation_bytes(candidate) / 1e6));
  options.tp_comm.collective_ms = 2.0;  // given: the times hold none
  options.tp_comm.given_micro_batch_size = 4;
  CHECK(tune::tp_all_reduce_cost(options, 4, 2, candidate) == Approx(2.0));
}
