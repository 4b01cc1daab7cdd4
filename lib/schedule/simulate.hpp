// Schedule simulator: from per-stage costs, each rank's timeline and gradient reductions, the step
// time, the bubble fraction and the peak number of activations held. Pure; no torch.
#pragma once

#include <string>
#include <vector>

#include "schedule/action.hpp"

namespace ppctl::schedule {

/// Cost of each compute kind on one stage, in milliseconds.
struct StageCosts {
  double forward = 1.0;      ///< F
  double backward = 2.0;     ///< B (full backward)
  double input_grad = 1.0;   ///< I
  double weight_grad = 1.0;  ///< W
  double defer_penalty = 0.0;  ///< added to a W that does not run right after its I on the rank (another
                               ///< compute action between them): on CPUs its inputs have left the cache
                               ///< by then (docs/benchmarks.md measured about 20% of W); 0 = not modelled
};

/// Costs for a whole program: per stage (size num_stages), or one entry used for every stage.
struct CostModel {
  std::vector<StageCosts> stages{StageCosts{}};
  double p2p_latency = 0.0;  ///< ms added to every transfer between different ranks
  double grad_reduce = 0.0;  ///< ms one stage's gradient reduction takes (all buckets), running
                             ///< beside compute
  double transfer_post = 0.0;  ///< ms the rank's thread spends on each SEND or RECV action it posts (host cost
                               ///< of posting: delays its next action; `ppctl plan --tune` measures it)
  std::string tp_collectives;  ///< how the stages' costs count the tensor-parallel collectives (already added
                               ///< to F, B and I: schedule::add_tp_collectives), one line for the report; ""
                               ///< when not said (tp 1)
};

/// One compute action as simulated.
struct TimedAction {
  Action action;
  double start = 0.0;  ///< ms from the start of the step
  double end = 0.0;
};

/// One stage's data-parallel gradient reduction as simulated (a collective beside the compute).
struct TimedReduction {
  int64_t stage = 0;
  double start = 0.0;  ///< ms from the start of the step
  double end = 0.0;
};

/// The simulated step.
struct Simulation {
  double step_time = 0.0;                     ///< ms until the last rank finishes
  std::vector<std::vector<TimedAction>> timeline;  ///< per rank, compute actions in execution order
  std::vector<std::vector<TimedReduction>> reductions;  ///< per rank, one per stage it runs, in
                                                        ///< start order
  std::vector<double> busy_time;              ///< per rank, ms of compute
  std::vector<double> bubble_fraction;        ///< per rank, 1 - busy / step_time
  double mean_bubble_fraction = 0.0;          ///< mean over ranks
  std::vector<int64_t> peak_activations;      ///< per rank, most (stage, microbatch) forwards held at once
                                              ///< (from F until its B, or until its W when split)
};

/// Simulates `program` (with or without communication actions): each rank runs its compute actions
/// in order, one at a time; an action starts when its rank is free and its inputs are ready
/// (F(s,j) after F(s-1,j); B or I of (s,j) after B or I of (s+1,j), or after F(s,j) on the last stage;
/// W(s,j) after I(s,j)), plus p2p_latency when the producer is on another rank. A W costs weight_grad, plus
/// defer_penalty unless the rank's previous compute action is its I (a deferred W). Communication never
/// blocks a sender. Gradient reductions take costs.grad_reduce each, one at a time per rank, without
/// occupying its compute: REDUCE_GRAD(s) starts when the rank reaches it (the end of its previous
/// compute action) or when the rank's previous reduction ends, whichever is later; a stage with no
/// REDUCE_GRAD in the program is reduced after its rank's last action (stages in order), as when the
/// reduction runs after the schedule. A rank's step ends at its last compute or reduction, whichever
/// ends later; step_time is the latest. Throws ppctl::ScheduleError for costs that are negative or not
/// finite, actions outside the geometry or on the wrong rank, or a program that cannot complete
/// (deadlock). Linear in the number of actions.
Simulation simulate(const Program& program, const CostModel& costs);

/// ASCII timeline, one line per rank, `width` columns for the whole step: each column shows the
/// compute kind running then (F, B, I, W; '.' idle), with a scale line. When some reduction lasts
/// longer than 0 ms, each rank's line is followed by one showing 'R' where its reductions run.
std::string format_timeline(const Simulation& simulation, int width = 100);

/// Chrome trace / Perfetto JSON of the simulation: one track (tid) per rank, named "rank R", one
/// complete ("X") event per compute action named in text form (`1F3`), timestamps in microseconds.
/// Reductions longer than 0 ms get a second track per rank, "rank R collectives" (tid = number of
/// ranks + R), with one event per reduction named `{stage}REDUCE_GRAD`.
std::string to_chrome_trace(const Simulation& simulation);

}  // namespace ppctl::schedule
