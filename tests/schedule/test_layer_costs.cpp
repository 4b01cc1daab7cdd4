// Tests of schedule/layer_costs: per-stage medians from a trace, and per-layer times from a run directory
// (its config.yaml and trace.json), with the refusals: not a run directory, another model, no trace; and of
// schedule/split_time's stage costs: recompute, the tensor-parallel collectives and the step they add.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "config/load.hpp"
#include "core/error.hpp"
#include "schedule/job_program.hpp"
#include "schedule/layer_costs.hpp"
#include "schedule/split_time.hpp"
#include "support/memory_spec.hpp"
#include "support/temp_dir.hpp"

using namespace ppctl;
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;

namespace {

/// A trace in runtime/trace.hpp's layout: for each (step, stage, microbatch) an F and a backward of the
/// given durations (ms; stage s's F takes forward[s] + step-dependent noise), step 1 ten times slower.
std::string trace_of(const std::vector<double>& forward, const std::vector<double>& backward, int64_t steps,
                     bool split_backward = false) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0}, {"args", {{"name", "rank 0"}}}});
  for (int64_t step = 1; step <= steps; ++step) {
    const double slow = step == 1 ? 10.0 : 1.0;
    for (size_t s = 0; s < forward.size(); ++s) {
      for (int64_t m = 0; m < 3; ++m) {
        const nlohmann::json args{{"stage", s}, {"microbatch", m}, {"step", step}};
        const double jitter = m == 1 ? 0.5 : 0.0;  // one outlier microbatch: the median ignores it
        events.push_back({{"ph", "X"}, {"cat", "F"}, {"name", "F"}, {"pid", 0}, {"tid", s}, {"ts", 0},
                          {"dur", 1000.0 * slow * (forward[s] + jitter)}, {"args", args}});
        if (split_backward) {
          for (const char* kind : {"I", "W"}) {
            events.push_back({{"ph", "X"}, {"cat", kind}, {"name", kind}, {"pid", 0}, {"tid", s}, {"ts", 0},
                              {"dur", 1000.0 * slow * backward[s] / 2}, {"args", args}});
          }
        } else {
          events.push_back({{"ph", "X"}, {"cat", "B"}, {"name", "B"}, {"pid", 0}, {"tid", s}, {"ts", 0},
                            {"dur", 1000.0 * slow * backward[s]}, {"args", args}});
        }
        events.push_back({{"ph", "X"}, {"cat", "send"}, {"name", "SEND_F"}, {"pid", 0}, {"tid", s}, {"ts", 0},
                          {"dur", 99000.0}, {"args", args}});
      }
    }
  }
  return nlohmann::json{{"traceEvents", events}}.dump();
}

const std::string kSpec = R"(model: {vocab_size: 512, layers: 6, hidden: 32, heads: 4, seq_len: 16}
pipeline: {stages: 3, microbatches: 3, micro_batch_size: 2, layers_per_stage: [1, 3, 2]}
data: {path: corpus.txt}
)";

/// A job spec read from `text` as if from dir/job.yaml (data: dir/corpus.txt).
config::JobSpec spec_in(const test::TempDir& dir, const std::string& text) {
  test::write_checked(dir.path / "corpus.txt", std::string(4000, 'a'));
  return config::parse_job_spec(text, (dir.path / "job.yaml").string(), dir.path.string());
}

std::string refusal(const std::string& run_dir, const config::JobSpec& spec) {
  try {
    schedule::run_layer_costs(run_dir, spec);
  } catch (const PlanError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("trace_stage_times: the median per action of each stage over the steps after the first") {
  int64_t first = 0, last = 0;
  auto t = schedule::trace_stage_times(trace_of({1.0, 2.0}, {3.0, 4.0}, 4), "t.json", 2, first, last);
  CHECK(first == 2);
  CHECK(last == 4);
  REQUIRE(t.size() == 2);
  CHECK(t[0].forward_ms == Approx(1.0));
  CHECK(t[1].forward_ms == Approx(2.0));
  CHECK(t[1].backward_ms == Approx(4.0));
  // A split backward: B = I + W. One traced step: that step is used, start-up and all.
  t = schedule::trace_stage_times(trace_of({1.0}, {3.0}, 1, true), "t.json", 1, first, last);
  CHECK(first == 1);
  CHECK(t[0].backward_ms == Approx(30.0));
  CHECK_THROWS_WITH(schedule::trace_stage_times(trace_of({1.0}, {3.0}, 2), "t.json", 2, first, last),
                    ContainsSubstring("t.json: stage 1 has no traced forward"));
  CHECK_THROWS_WITH(schedule::trace_stage_times("{\"traceEvents\": []}", "t.json", 1, first, last),
                    ContainsSubstring("no F, B, I or W actions traced"));
  CHECK_THROWS_WITH(schedule::trace_stage_times("not json", "t.json", 1, first, last), ContainsSubstring("not JSON"));
  // a number beyond a double's range is nlohmann's out_of_range, not a parse_error: reported the same way
  CHECK_THROWS_AS(schedule::trace_stage_times("{\"traceEvents\": [2E615]}", "t.json", 1, first, last), PlanError);
}

TEST_CASE("trace_post_ms: the median Post slice (send or recv) from the given step on") {
  // trace_of's send slices take 99 ms in every step.
  CHECK(schedule::trace_post_ms(trace_of({1.0, 2.0}, {3.0, 4.0}, 3), 2) == 99.0);
  nlohmann::json events = nlohmann::json::array();
  const auto post = [&](const char* cat, double ms, int64_t step) {
    events.push_back({{"ph", "X"}, {"cat", cat}, {"name", "x"}, {"pid", 0}, {"tid", 0}, {"ts", 0},
                      {"dur", 1000.0 * ms}, {"args", {{"stage", 0}, {"microbatch", 0}, {"step", step}}}});
  };
  post("send", 50.0, 1);  // step 1, left out
  post("send", 0.25, 2);
  post("recv", 0.5, 2);
  post("recv", 4.0, 3);
  post("wait", 0.75, 2);  // a wait is not a post
  const auto text = nlohmann::json{{"traceEvents", events}}.dump();
  CHECK(schedule::trace_post_ms(text, 2) == 0.5);
  CHECK(schedule::trace_post_ms(text, 1) == (0.5 + 4.0) / 2);
  CHECK_FALSE(schedule::trace_post_ms(trace_of({1.0}, {3.0}, 2), 9).has_value());
}

TEST_CASE("metrics_step_ms: the median step_time_s of the step records from the given step on, in ms") {
  const std::string text =
      "{\"event\":\"step\",\"step\":1,\"step_time_s\":5.0,\"skipped\":false}\n"
      "{\"event\":\"step\",\"step\":2,\"step_time_s\":0.02,\"skipped\":false}\n"
      "{\"event\":\"step\",\"step\":3,\"step_time_s\":0.9,\"skipped\":true}\n"
      "{\"event\":\"step\",\"step\":4,\"step_time_s\":0.04}\n"
      "{\"event\":\"step\",\"step\":5,\"step_time_s\":0.03}\n"
      "{\"event\":\"step\",\"step\":7,\"step_time_s\":0}\n"
      "{\"event\":\"step\",\"step\":8,\"step_time_s\":-1.5}\n"
      "{\"event\":\"step\",\"step\":9,\"step_time_s\":1e999}\n"
      "{\"event\":\"step\",\"step\":9,\"step_time_s\":1e300}\n"
      "{\"event\":\"step\",\"step\":10,\"step_time_s\":\"0.03\"}\n"
      "{\"event\":\"end\",\"step_time_s\":7.0}\n"
      "{\"event\":\"step\",\"step\":6,\"step_ti";  // a torn last line
  CHECK(schedule::metrics_step_ms(text, 2) == Approx(30.0));  // steps 2, 4, 5: not the skipped 3
  CHECK(schedule::metrics_step_ms(text, 1) == Approx(35.0));  // 5000, 20, 40, 30
  CHECK(!schedule::metrics_step_ms(text, 7));  // 0, negative, out of range, text: none is a step time
  CHECK(!schedule::metrics_step_ms("", 1));
  CHECK(!schedule::metrics_step_ms("not json\n[1, 2]\n", 1));
}

TEST_CASE("run_layer_costs: fits a run's trace under its own layout; refuses another model or no trace") {
  test::TempDir dir;
  const auto spec = spec_in(dir, kSpec);
  const auto run = dir.path / "run";
  CHECK_THAT(refusal((dir.path / "nothing").string(), spec), ContainsSubstring("no config.yaml"));
  test::write_checked(run / "config.yaml", kSpec);
  CHECK_THAT(refusal(run.string(), spec),
             ContainsSubstring("has no trace.json") && ContainsSubstring("observe.trace_steps >= 2"));
  // Stage sums of block (0.5, 1.5), embedding (0.2, 0.3), head (6, 4) over the split [1, 3, 2].
  test::write_checked(run / "trace.json", trace_of({0.7, 1.5, 7.0}, {1.8, 4.5, 7.0}, 3));
  const auto given = schedule::run_layer_costs(run.string(), spec);
  REQUIRE(given.times.blocks.size() == 6);
  CHECK(given.times.blocks[0].forward_ms == Approx(0.5));
  CHECK(given.times.blocks[0].backward_ms == Approx(1.5));
  CHECK(given.times.embedding.forward_ms == Approx(0.2));
  CHECK(given.times.embedding.backward_ms == Approx(0.3));
  CHECK(given.times.head.forward_ms == Approx(6.0));
  CHECK(given.times.head.backward_ms == Approx(4.0));
  REQUIRE(given.measured.size() == 3);
  CHECK(given.measured[1].blocks == 3);
  CHECK_THAT(given.source, ContainsSubstring("steps 2-3") && ContainsSubstring("its split [1, 3, 2]"));
  CHECK(given.notes.empty());
  CHECK(!given.step_ms);  // no metrics.jsonl
  CHECK(given.no_step == "it has no metrics.jsonl");
  REQUIRE(given.run);
  CHECK(given.run->pipeline.stages == 3);
  // With metrics.jsonl: the median measured step over the trace's steps used (2-3), in ms.
  test::write_checked(run / "metrics.jsonl", "{\"event\":\"step\",\"step\":1,\"step_time_s\":9.0}\n"
                                             "{\"event\":\"step\",\"step\":2,\"step_time_s\":0.030}\n"
                                             "{\"event\":\"step\",\"step\":3,\"step_time_s\":0.050}\n");
  CHECK(schedule::run_layer_costs(run.string(), spec).step_ms == Approx(40.0));
  // One step traced: its trace is used (with a note), its step time (start-up included) is not.
  test::write_checked(run / "trace.json", trace_of({0.7, 1.5, 7.0}, {1.8, 4.5, 7.0}, 1));
  test::write_checked(run / "metrics.jsonl", "{\"event\":\"step\",\"step\":1,\"step_time_s\":9.0}\n");
  const auto one_step = schedule::run_layer_costs(run.string(), spec);
  CHECK(!one_step.step_ms);
  CHECK_THAT(one_step.no_step, ContainsSubstring("no step record from step 2 on"));
  test::write_checked(run / "trace.json", trace_of({0.7, 1.5, 7.0}, {1.8, 4.5, 7.0}, 3));
  // The same run planned with 2 stages and another runtime: fine, with a note.
  auto other = spec_in(dir, kSpec + "runtime: {precision: bf16}\n");
  CHECK_THAT(schedule::run_layer_costs(run.string(), other).notes.at(0), ContainsSubstring("runtime.precision"));
  // A run at another tensor-parallel size: each action held other collectives and another share of the work.
  auto tensor_parallel = spec_in(dir, R"(model: {vocab_size: 512, layers: 6, hidden: 32, heads: 4, seq_len: 16}
pipeline: {stages: 3, microbatches: 3, micro_batch_size: 2, layers_per_stage: [1, 3, 2], tensor_parallel: 2}
data: {path: corpus.txt}
)");
  CHECK_THAT(schedule::run_layer_costs(run.string(), tensor_parallel).notes.at(0),
             ContainsSubstring("the run had pipeline.tensor_parallel 1, this job 2: its times may not carry over"));
  // The same tp with the sequence split another way: noted too (a run written with tp 2 and sequence_parallel).
  test::write_checked(run / "config.yaml", R"(model: {vocab_size: 512, layers: 6, hidden: 32, heads: 4, seq_len: 16}
pipeline: {stages: 3, microbatches: 3, micro_batch_size: 2, layers_per_stage: [1, 3, 2], tensor_parallel: 2,
           sequence_parallel: false}
data: {path: corpus.txt}
)");
  CHECK_THAT(schedule::run_layer_costs(run.string(), tensor_parallel).notes.at(0),
             ContainsSubstring("the run had pipeline.sequence_parallel false, this job true"));
  test::write_checked(run / "config.yaml", kSpec);
  // Another model, another micro batch size: refused, every difference named.
  other = spec_in(dir, R"(model: {vocab_size: 1024, layers: 6, hidden: 32, heads: 4, seq_len: 16}
pipeline: {stages: 2, microbatches: 3, micro_batch_size: 4}
data: {path: corpus.txt}
)");
  CHECK_THAT(refusal(run.string(), other),
             ContainsSubstring("ran another model: model.vocab_size 512 there, 1024 here; pipeline.micro_batch_size 2 "
                               "there, 4 here") &&
                 ContainsSubstring("fix: "));
  // As a probe of `ppctl plan --tune` (any_micro_batch_size): the same model at another micro batch size is
  // taken, with the run's size and its median Post slice.
  const auto at_four = spec_in(dir, R"(model: {vocab_size: 512, layers: 6, hidden: 32, heads: 4, seq_len: 16}
pipeline: {stages: 3, microbatches: 3, micro_batch_size: 4}
data: {path: corpus.txt}
)");
  CHECK_THAT(refusal(run.string(), at_four), ContainsSubstring("pipeline.micro_batch_size 2 there, 4 here"));
  const auto probe = schedule::run_layer_costs(run.string(), at_four, true);
  CHECK(probe.micro_batch_size == 2);
  CHECK(probe.transfer_post_ms == 99.0);
  CHECK(probe.times.head.forward_ms == Approx(6.0));
  CHECK(given.micro_batch_size == 2);
  // given_layer_costs: a folder is a run directory, anything else a costs file.
  CHECK(schedule::given_layer_costs(run.string(), spec).source.rfind("run directory", 0) == 0);
  CHECK_THROWS_WITH(schedule::given_layer_costs((dir.path / "c.json").string(), spec), ContainsSubstring("cannot be read"));
}

TEST_CASE("job_cost_model: recompute full or blocks adds the stage's forward to B and I, not to F or W") {
  test::TempDir dir;
  auto spec = spec_in(dir, kSpec);
  const auto program = schedule::job_program(spec);
  const auto layout = schedule::job_layout(spec, program);
  plan::LayerTimes times;
  for (int i = 0; i < 6; ++i) times.blocks.push_back({1.0 + i, 3.0 + i});
  times.embedding = {0.5, 1.0};
  times.head = {2.0, 4.0};
  const auto plain = schedule::layout_cost_model(layout, times, 0.3, 2.0);
  CHECK(schedule::job_cost_model(spec, layout, times, 0.3, 2.0).stages.size() == plain.stages.size());
  for (const auto mode : {config::Recompute::None, config::Recompute::Full, config::Recompute::Blocks}) {
    spec.train.recompute = mode;
    const auto costs = schedule::job_cost_model(spec, layout, times, 0.3, 2.0);
    CHECK(costs.p2p_latency == 0.3);
    CHECK(costs.grad_reduce == 2.0);
    for (size_t s = 0; s < plain.stages.size(); ++s) {
      const double extra = mode == config::Recompute::None ? 0.0 : plain.stages[s].forward;
      CHECK(costs.stages[s].forward == plain.stages[s].forward);
      CHECK(costs.stages[s].backward == Approx(plain.stages[s].backward + extra));
      CHECK(costs.stages[s].input_grad == Approx(plain.stages[s].input_grad + extra));
      CHECK(costs.stages[s].weight_grad == plain.stages[s].weight_grad);
    }
  }
}

namespace {

/// The shared small GPT-2 spec (tests/support/memory_spec.hpp) at `stages` stages, `microbatches`, tp `t` (1f1b),
/// with its program and layout.
struct TpJob {
  config::JobSpec spec;
  schedule::Program program;
  plan::Layout layout;
};

TpJob tp_job(int64_t stages, int64_t microbatches, int64_t t) {
  TpJob job{test::memory_test_spec(), {}, {}};
  job.spec.pipeline.stages = stages;
  job.spec.pipeline.microbatches = microbatches;
  job.spec.pipeline.tensor_parallel = t;
  job.program = schedule::job_program(job.spec);
  job.layout = plan::make_layout(job.spec, &job.program.stage_to_rank);
  return job;
}

}  // namespace

TEST_CASE("add_tp_collectives: F, B and I grow by their counted collectives, W not; one stage's step by m times") {
  auto [spec, program, layout] = tp_job(1, 4, 2);  // gpt2, 8 blocks, hidden 64, seq_len 32, micro_batch_size 2, fp32
  spec.pipeline.sequence_parallel = false;
  const schedule::CostModel base;  // F = 1, B = 2, I = W = 1
  auto costs = base;
  const double c = 0.25;
  schedule::add_tp_collectives(costs, spec, layout, {c});
  // F: 2 all-reduces per block and the embedding's, and the loss's maxima and sums (t + 2 fp32 values a token,
  // against hidden fp32 values a token); B and I: 2 per block and the head input's gradient.
  const double loss = (2 + 2) * 4.0 / (64 * 4.0);
  REQUIRE(costs.stages.size() == 1);
  CHECK(costs.stages[0].forward == Approx(1.0 + c * (2 * 8 + 1 + loss)));
  CHECK(costs.stages[0].backward == Approx(2.0 + c * (2 * 8 + 1)));
  CHECK(costs.stages[0].input_grad == Approx(1.0 + c * (2 * 8 + 1)));
  CHECK(costs.stages[0].weight_grad == 1.0);
  // One stage runs its m forwards and backwards one after another: the step grows by m x (F's + B's).
  const double before = schedule::simulate(program, base).step_time;
  CHECK(schedule::simulate(program, costs).step_time == Approx(before + 4 * c * (2 * 8 + 1 + loss + 2 * 8 + 1)));
  // Sequence parallelism moves the same bytes in twice the collectives: the same time but for the small ones.
  spec.pipeline.sequence_parallel = true;
  auto sp = base;
  schedule::add_tp_collectives(sp, spec, layout, {c});
  CHECK(sp.stages[0].forward == Approx(costs.stages[0].forward));
  // At tp 1 nothing is added.
  spec.pipeline.tensor_parallel = 1;
  auto none = base;
  schedule::add_tp_collectives(none, spec, layout, {c});
  CHECK(none.stages.size() == 1);
  CHECK(none.stages[0].forward == 1.0);
}

TEST_CASE("add_tp_collectives on a 1f1b pipeline of 4 stages: every stage's costs, a longer step; recompute repeats F's") {
  auto [spec, program, layout] = tp_job(4, 8, 4);
  const schedule::CostModel base;
  auto costs = base;
  schedule::add_tp_collectives(costs, spec, layout, {0.1});
  REQUIRE(costs.stages.size() == 4);
  // A middle stage (2 blocks, sequence parallelism): 2 all-gathers + 2 reduce-scatters per block, i.e. 2 all-reduces'
  // time each way (the norms' and biases' partial gradients are summed once per step, not per microbatch).
  CHECK(costs.stages[1].forward == Approx(1.0 + 0.1 * 4));
  CHECK(costs.stages[1].backward == Approx(2.0 + 0.1 * 4));
  // Equal middle stages in a 1f1b of m 8 on 4 ranks: at least (m + p - 1) x the middle stage's F + B.
  CHECK(schedule::simulate(program, costs).step_time >=
        (8 + 4 - 1) * (costs.stages[1].forward + costs.stages[1].backward) - 1e-9);
  spec.train.recompute = config::Recompute::Full;
  auto again = base;
  schedule::add_tp_collectives(again, spec, layout, {0.1});
  CHECK(again.stages[1].forward == Approx(costs.stages[1].forward));
  CHECK(again.stages[1].backward == Approx(costs.stages[1].backward + 0.1 * 4));
  CHECK(again.stages[1].input_grad == Approx(costs.stages[1].input_grad + 0.1 * 4));
}

TEST_CASE("add_plan_tp_collectives: measured costs hold them unless --tp-collective-ms; default ones by FLOPs") {
  const auto [spec, program, layout] = tp_job(2, 4, 2);
  plan::TpCommOptions options;
  schedule::CostModel measured;
  schedule::add_plan_tp_collectives(measured, spec, layout, options, schedule::PlanCosts::Measured);
  CHECK(measured.stages.size() == 1);
  CHECK(measured.stages[0].forward == 1.0);
  CHECK_THAT(measured.tp_collectives, ContainsSubstring("not added: measured costs hold the spec's collectives"));
  options.collective_ms = 0.5;
  options.given_micro_batch_size = 2;
  schedule::add_plan_tp_collectives(measured, spec, layout, options, schedule::PlanCosts::Measured);
  CHECK(measured.stages[1].forward > 1.0 + 0.5 * 8);  // 4 blocks' 2 all-reduces' time, and the loss's small ones
  CHECK_THAT(measured.tp_collectives, ContainsSubstring("(--tp-collective-ms 0.5 at micro_batch_size 2)"));
  // Default costs: each stage's F = 1 is its forward, the FLOPs of 4 blocks (and the head) at --tflops.
  options.collective_ms.reset();
  schedule::CostModel by_flops;
  schedule::add_plan_tp_collectives(by_flops, spec, layout, options, schedule::PlanCosts::Default);
  const double block_ms = plan::forward_ms(spec, plan::block_forward_flops(spec.model), options);
  const double embedding_ms = plan::forward_ms(spec, plan::flop_layer_costs(spec.model).embedding, options);
  const double activation = plan::tp_activation_bytes(spec);
  CHECK(by_flops.stages[0].forward ==
        Approx(1.0 + plan::tp_all_reduce_ms(spec, options) / (4 * block_ms + embedding_ms) *
                         plan::stage_tp_collectives(spec, layout.stages[0]).forward.all_reduce_equivalents(activation)));
  CHECK_THAT(by_flops.tp_collectives, ContainsSubstring("in units of its forward (F = 1: its FLOPs at 400 TFLOP/s"));
}
