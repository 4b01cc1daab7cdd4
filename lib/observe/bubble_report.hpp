// The bubble and step time each rank measured, next to the plan (the simulator with ppctl plan's
// default costs) and to the simulator fed the measured per-stage costs. No torch.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "schedule/action.hpp"
#include "schedule/simulate.hpp"

namespace ppctl::observe {

/// What one rank measured over the timed steps (every step but the first, which carries start-up
/// costs), summed over those steps.
struct RankTiming {
  int64_t steps = 0;                       ///< timed steps
  double schedule_ms = 0.0;                ///< wall time of the schedule (the executor's run_step)
  std::array<double, 4> compute_ms{};      ///< in F, B, I, W (index = ActionKind), receive waits excluded
  std::array<int64_t, 4> compute_count{};  ///< how many of each ran
};

/// Per rank, three bubble fractions, and the step time measured against the simulated one.
struct BubbleReport {
  std::vector<double> measured;   ///< 1 - compute / schedule time
  std::vector<double> planned;    ///< simulation with ppctl plan's default costs (F 1, B 2, I 1, W 1 ms)
  std::vector<double> simulated;  ///< simulation with each stage's measured mean cost per kind
  double measured_step_ms = 0.0;   ///< the slowest rank's mean schedule time per step
  double simulated_step_ms = 0.0;  ///< the simulated step with the measured costs (no transfer time)
};

/// How many doubles one RankTiming takes in a flat buffer (steps, schedule ms, 4 compute ms, 4 counts): the
/// ranks' timings travel in one all-reduce, each rank filling its own slot.
inline constexpr size_t kRankTimingValues = 10;
/// Writes `timing` into out[0, kRankTimingValues).
void pack_rank_timing(const RankTiming& timing, double* out);
/// Reads what pack_rank_timing wrote at `in` (counts rounded to integers).
RankTiming unpack_rank_timing(const double* in);

/// The simulator's cost model from `timings` (one per rank of `program`): each stage costs its
/// rank's mean per kind (ranks holding several stages share it; kinds a rank never ran cost 0), no
/// transfer latency.
schedule::CostModel measured_cost_model(const schedule::Program& program,
                                        const std::vector<RankTiming>& timings);

/// Compares `timings` (one per rank of `program`, each with steps > 0) with the simulator, fed
/// plan's default costs and measured_cost_model. Throws ppctl::ScheduleError when the program cannot
/// be simulated.
BubbleReport compare_bubbles(const schedule::Program& program, const std::vector<RankTiming>& timings);

/// Lines for the log: per rank "rank R: measured B | planned B | simulated B", then the step time
/// measured against the one simulated with the measured costs.
std::string format_bubble_report(const BubbleReport& report);

}  // namespace ppctl::observe
