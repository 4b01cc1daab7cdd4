// zb-auto: a zero-bubble schedule with one stage per rank whose weight-gradient actions (W) are placed
// from the costs of F, I and W, after Zero Bubble's automatic scheduler (arXiv 2401.10241 §3), with the
// cost of deferring a W and a limit on the microbatches a rank holds. No torch.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "schedule/action.hpp"
#include "schedule/generate.hpp"
#include "schedule/simulate.hpp"

namespace ppctl::schedule {

/// The cost model zb-auto places W with, from params.zb_auto (config::ZbAutoSpec): for stage s, F = f,
/// I = i, W = w, defer_penalty (each list's entry s, or its only entry), and B = b (what the backward
/// costs unsplit, which 1F1B runs; b empty, not given: i + w); p2p_latency as given, no gradient
/// reduction. Throws ppctl::ScheduleError naming pipeline.zb_auto's key when a list has neither 1 nor
/// params.ranks entries (b: nor 0) or a value is negative or not finite.
CostModel zb_auto_cost_model(const ScheduleParams& params);

/// Per rank r, the most microbatches it may hold activations for at once (from its F to its W, as
/// Simulation::peak_activations counts): max(L, min(p - r, m)), L = params.zb_auto.max_in_flight or p when
/// that is 0. Never below what 1F1B's order of F and I itself holds (p - r, or m when fewer).
std::vector<int64_t> zb_auto_in_flight_limits(const ScheduleParams& params);

/// One rule for placing the W of every rank, given 1F1B's order of F and I. Before each F or I a rank
/// runs its oldest pending W (W of one stage run in microbatch order) while it holds its in-flight limit
/// and the next action is an F (memory), while more than lag[r] W are pending or the oldest is of a
/// microbatch below defer_from[r], and while the idle time before the next F or I (known from the costs)
/// is positive and at least `fill` times the W's cost; the W left run at the end. lag 0 with fill
/// infinite is 1F1B with the backward split (W right after its I); lag r from microbatch 0 with fill
/// infinite is ZB-H1. A later defer_from keeps W next to its I (no defer_penalty) until the cooldown.
struct WPlacement {
  std::vector<int64_t> lag;         ///< per rank: W kept pending after an I (0 = W right after its I)
  std::vector<int64_t> defer_from;  ///< per rank: the W of microbatches below it run right after their I
  double fill = std::numeric_limits<double>::infinity();  ///< W run early into an idle gap of at least
                                                          ///< fill x its cost; infinite = never
};

/// The compute-only program of `placement` (stage r on rank r, as generate_compute returns), its times
/// taken from `costs` (per-stage F, I, W, defer_penalty; p2p_latency) and `in_flight_limit` (per rank).
/// Throws ppctl::ScheduleError when placement.lag, placement.defer_from, in_flight_limit or costs.stages
/// does not have params.ranks entries.
Program place_w(const ScheduleParams& params, const CostModel& costs, const std::vector<int64_t>& in_flight_limit,
                const WPlacement& placement);

/// What zb-auto chose, and what it was compared with.
struct ZbAutoPlan {
  Program program;                       ///< compute only, as generate_compute returns it: F, I and W, or
                                         ///< F and B when 1F1B (the backward not split) was chosen
  CostModel costs;                       ///< zb_auto_cost_model(params)
  std::vector<int64_t> in_flight_limit;  ///< zb_auto_in_flight_limits(params)
  std::string placement;                 ///< how the chosen program places W, in words
  std::vector<int64_t> deferred_w;       ///< per rank: W not right after their I (charged defer_penalty); 0 when
                                         ///< the program has no W
  bool backward_given = false;           ///< pipeline.zb_auto.b was given (costs' B is it, not I + W)
  bool backward_split = true;            ///< the program runs I and W; false: 1F1B's unsplit B (cheaper under b)
  std::vector<int64_t> peak_in_flight;   ///< per rank: Simulation::peak_activations of the program
  double step_time = 0.0;                ///< simulated ms of `program` under `costs`
  double one_f_one_b_step = 0.0;         ///< simulated ms of 1F1B (B unsplit: b, or I + W) under `costs`
  double zb_h1_step = 0.0;               ///< simulated ms of ZB-H1 under `costs` (its deferred W charged)
  bool zb_h1_fits = false;               ///< ZB-H1 holds no more than in_flight_limit on every rank
  int64_t candidates = 0;                ///< programs simulated to choose
};

/// zb-auto for `params` (kind zb-auto, one stage per rank): of the candidates it simulates under
/// zb_auto_cost_model(params), the first with the least step time. In this order: W right after its I
/// (1F1B split; never slower than 1F1B when B = I + W), 1F1B itself (its B unsplit: chosen only when
/// strictly faster, e.g. pipeline.zb_auto.b below I + W; the program then has B, no I nor W), ZB-H1 (when
/// it fits in_flight_limit); then place_w with ZB-H1's lags (r) and the most the limit allows, deferring
/// only the W the cooldown can take (from m - min(p - r, m) - lag) or from microbatch 0, with fill
/// infinite, 1, 0.5 and 0 (W into idle gaps never,
/// that fit it, half fit it, any); then a coordinate search from the best over each rank's lag and
/// defer_from and the fill, until a round over every coordinate improves nothing. The candidates after
/// the first three stop once about 3 million actions have been placed and simulated in all
/// (deterministic: counted, not timed; p 1024, m 2048 simulates only the first three, a few seconds). So its step is never above 1F1B's, nor ZB-H1's
/// when ZB-H1 fits the limit (it always does with the default max_in_flight), and every rank holds at
/// most its limit. Throws ppctl::ScheduleError via check_params.
ZbAutoPlan plan_zb_auto(const ScheduleParams& params);

/// What `ppctl plan` prints for zb-auto: the costs used (B only when pipeline.zb_auto.b was given; not
/// given it is I + W), the in-flight limits, the placement chosen and why (W deferred per rank, or that the
/// backward runs unsplit when 1F1B was chosen; peaks; the simulated step against 1F1B's and ZB-H1's),
/// several lines, each ending in '\n'.
std::string format_zb_auto(const ZbAutoPlan& plan);

}  // namespace ppctl::schedule
