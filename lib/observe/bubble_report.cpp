// Measured against planned and simulated bubbles.
#include "observe/bubble_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/check.hpp"

namespace ppctl::observe {

void pack_rank_timing(const RankTiming& timing, double* out) {
  out[0] = static_cast<double>(timing.steps);
  out[1] = timing.schedule_ms;
  for (size_t k = 0; k < 4; ++k) {
    out[2 + k] = timing.compute_ms[k];
    out[6 + k] = static_cast<double>(timing.compute_count[k]);
  }
  static_assert(6 + 4 == kRankTimingValues, "pack_rank_timing writes kRankTimingValues values");
}

RankTiming unpack_rank_timing(const double* in) {
  RankTiming timing;
  timing.steps = std::llround(in[0]);
  timing.schedule_ms = in[1];
  for (size_t k = 0; k < 4; ++k) {
    timing.compute_ms[k] = in[2 + k];
    timing.compute_count[k] = std::llround(in[6 + k]);
  }
  return timing;
}

schedule::CostModel measured_cost_model(const schedule::Program& program,
                                        const std::vector<RankTiming>& timings) {
  PPCTL_ASSERT(static_cast<int64_t>(timings.size()) == program.num_ranks(),
               fmt::format("{} timings for {} ranks", timings.size(), program.num_ranks()));
  schedule::CostModel costs;
  costs.stages.assign(static_cast<size_t>(program.num_stages), {});
  for (size_t s = 0; s < costs.stages.size(); ++s) {
    const RankTiming& t = timings.at(static_cast<size_t>(program.stage_to_rank[s]));
    std::array<double, 4> mean{};
    for (size_t k = 0; k < mean.size(); ++k)
      mean[k] = t.compute_count[k] > 0 ? t.compute_ms[k] / static_cast<double>(t.compute_count[k]) : 0.0;
    costs.stages[s] = {mean[0], mean[1], mean[2], mean[3]};
  }
  return costs;
}

BubbleReport compare_bubbles(const schedule::Program& program, const std::vector<RankTiming>& timings) {
  const auto measured_costs = measured_cost_model(program, timings);
  BubbleReport report;
  for (const RankTiming& t : timings) {
    PPCTL_ASSERT(t.steps > 0 && t.schedule_ms > 0, "compare_bubbles needs timed steps on every rank");
    double compute = 0.0;
    for (double ms : t.compute_ms) compute += ms;
    report.measured.push_back(1.0 - compute / t.schedule_ms);
    report.measured_step_ms =
        std::max(report.measured_step_ms, t.schedule_ms / static_cast<double>(t.steps));
  }
  report.planned = schedule::simulate(program, {}).bubble_fraction;
  const auto simulation = schedule::simulate(program, measured_costs);
  report.simulated = simulation.bubble_fraction;
  report.simulated_step_ms = simulation.step_time;
  return report;
}

std::string format_bubble_report(const BubbleReport& report) {
  std::string out = "bubble per rank: measured | planned (plan's costs) | simulated (measured costs)";
  for (size_t r = 0; r < report.measured.size(); ++r) {
    out += fmt::format("\n  rank {}: {:.3f} | {:.3f} | {:.3f}", r, report.measured[r], report.planned[r],
                       report.simulated[r]);
  }
  out += fmt::format("\nstep (schedule only): measured {:.2f} ms, simulated with the measured costs {:.2f} ms "
                     "(ratio {:.2f})",
                     report.measured_step_ms, report.simulated_step_ms,
                     report.simulated_step_ms > 0 ? report.measured_step_ms / report.simulated_step_ms : 0.0);
  return out;
}

}  // namespace ppctl::observe
