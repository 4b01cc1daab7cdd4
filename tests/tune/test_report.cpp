// Tests of tune/report: the listed configurations with their lines, the lever note, the spec's own rank, the
// counts of what was ruled out, and the text when nothing fits.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <string>

#include "tune/report.hpp"

using namespace ppctl;
using Catch::Matchers::ContainsSubstring;

namespace {

tune::Evaluated entry(double step, int64_t peak, const std::string& lever) {
  tune::Evaluated e;
  e.knobs = {config::ScheduleKind::ZBH1, 1, 16, 2, tune::Split::Auto, config::Recompute::None};
  e.changes = {{"pipeline.schedule", "zb-h1"}, {"train.recompute", "none"}, {"pipeline.layers_per_stage", ""}};
  e.step = step;
  e.simulated = step;
  e.bubble = 0.125;
  e.peak_bytes = peak;
  e.peak_rank = 2;
  e.lever = lever;
  return e;
}

}  // namespace

TEST_CASE("format_tune lists each configuration with its step, bubble, peak and indented spec lines") {
  config::JobSpec spec;
  spec.source = "job.yaml";
  spec.pipeline.stages = 4;
  spec.pipeline.microbatches = 8;
  spec.pipeline.micro_batch_size = 4;
  tune::TuneOptions options;
  options.times_source = "costs file c.json";
  options.memory_gib = 2;
  options.memory_source = "--memory-gib 2";
  tune::TuneResult result;
  result.top = {entry(12.3456, 3LL << 20, ""), entry(13.0, 3LL << 30, "optimizer.distributed: true")};
  result.candidates = 10;
  result.simulated = 4;
  result.ranked = 2;
  result.ruled_out = {{"rule: pipeline.virtual_stages: too many", 5}, {"does not fit 2 GiB per rank (--memory-gib 2)", 3}};
  result.own = {true, "", 20.0, 20.0, 0.5, 1LL << 30, true, 3};
  const auto text = tune::format_tune(result, spec, options);
  CHECK_THAT(text, ContainsSubstring("32 sequences per replica per step"));
  CHECK_THAT(text, ContainsSubstring("at most 2 GiB per pipeline rank (--memory-gib 2)"));
  CHECK_THAT(text, ContainsSubstring(" 1. step 12.35, bubble 0.125, peak 3.00 MiB per rank (pp rank 2)  zb-h1, m 16 x mbs 2, "
                                     "auto split, recompute none\n"
                                     "      pipeline: {schedule: zb-h1}\n"
                                     "      train: {recompute: none}\n"
                                     "      # remove: pipeline.layers_per_stage\n"));
  CHECK_THAT(text, ContainsSubstring(" 2. step 13.00, bubble 0.125, peak 3.00 GiB per rank"));
  CHECK_THAT(text, ContainsSubstring("with optimizer.distributed: true (memory lever: its time not modelled)"));
  CHECK_THAT(text, ContainsSubstring("step 20.00, bubble 0.500, peak 1.00 GiB per rank; rank 3 (2 of the 2 ranked"));
  CHECK_THAT(text, ContainsSubstring("10 candidates: 4 simulated, 2 ranked (fit); ruled out or not simulated: 8\n"));
  CHECK_THAT(text, ContainsSubstring("       5  rule: pipeline.virtual_stages: too many\n"));
  CHECK_THAT(text, !ContainsSubstring("no configuration fits"));
  CHECK_THAT(text, ContainsSubstring("top 2 by simulated step (ms)"));
  CHECK_THAT(text, !ContainsSubstring("calibrated"));  // costs not measured: nothing to calibrate on
  // Calibrated on two probes: the line with the fit and each probe, each step with its prediction.
  result.calibration.probes = {{"runs/a", 4, 16, 30.0, 25.0}, {"runs/b", 1, 64, 52.0, 23.0}};
  result.calibration.fixed_ms = 0.5;
  result.calibration.per_action_ms = 0.25;
  result.calibration.least_actions = 16;
  result.top[0].step = 12.3456 + 0.5 + 0.25 * 24;
  result.own.step = 26.5;
  const auto calibrated = tune::format_tune(result, spec, options);
  CHECK_THAT(calibrated, ContainsSubstring("calibrated predicted step = simulated step +0.5 ms +0.25 ms x the compute "
                                           "actions of the busiest rank (at least 16: the fewest of the probes)"));
  CHECK_THAT(calibrated, ContainsSubstring("runs/a (mbs 4, 16 compute actions on the busiest rank): measured 30.00, "
                                           "simulated 25.00; runs/b (mbs 1, 64"));
  CHECK_THAT(calibrated, ContainsSubstring("top 2 by predicted step (ms)"));
  CHECK_THAT(calibrated, ContainsSubstring(" 1. step 12.35, predicted 18.85, bubble 0.125"));
  CHECK_THAT(calibrated, ContainsSubstring("step 20.00, predicted 26.50, bubble 0.500"));
  result.calibration = {};
  result.top.clear();
  result.own.ranked = false;
  result.own.why_not = "a custom schedule";
  const auto none = tune::format_tune(result, spec, options);
  CHECK_THAT(none, ContainsSubstring("no configuration fits: none of the 10 candidates"));
  CHECK_THAT(none, ContainsSubstring("the spec's own configuration: not ranked (a custom schedule)"));
}
