// A pipeline timeline drawn as SVG, as the schedule papers draw them (GPipe, Megatron-LM arXiv 2104.04473
// Fig. 4, Zero Bubble arXiv 2401.10241 Fig. 2): one row per rank, time left to right, each F/B/I/W a box
// coloured by kind and numbered by microbatch, idle time (the bubble) left blank. Planned (the simulator's step)
// or measured (one step of a run's trace.json). Torch-free, for `ppctl plan --svg`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schedule/action.hpp"
#include "schedule/simulate.hpp"

namespace ppctl::observe {

/// One box of a timeline: a compute action, or (reduction) a stage's data-parallel gradient reduction.
struct TimelineSlice {
  schedule::Action action;  ///< F, B, I or W of (stage, microbatch); for a reduction its stage
  bool reduction = false;   ///< a REDUCE_GRAD's collective, drawn on a thin line under the rank's row
  double start_ms = 0.0;    ///< from the start of the step
  double end_ms = 0.0;
};

/// What to draw: per rank, its slices; the step's length; a title and the rows' names.
struct Timeline {
  std::string title;                                ///< e.g. "job.yaml: 1f1b, p 4, m 8 (simulated)"
  std::vector<std::string> rank_names;              ///< one per row, "rank 0", ...
  std::vector<std::vector<TimelineSlice>> slices;   ///< per rank
  double step_ms = 0.0;                             ///< the span the x axis covers
  int64_t step = 0;                                 ///< measured: the training step drawn (from 1); 0 = simulated
};

/// The simulator's step (schedule::simulate) as a timeline: every rank's compute actions and reductions.
Timeline planned_timeline(const schedule::Simulation& simulation, std::string title);

/// Step `step` (from 1; nullopt: the last step every rank traced completely) of a merged run trace
/// (`RUN_DIR/trace.json`, observe::merge_trace_parts) as a timeline, times from that step's earliest start:
/// the compute slices (categories F, B, I, W) and gradient reductions ("reduce") whose args.step is `step`.
/// `source` names the file in errors. Throws ppctl::PlanError naming the file when it is not such a trace, or
/// traced no such step (with the steps it holds).
Timeline measured_timeline(const std::string& trace_json, const std::string& source, std::optional<int64_t> step,
                           std::string title);

/// The timeline as a standalone SVG document: a row per rank with its boxes (F blue, B green, I teal, W orange,
/// reductions purple, each numbered by microbatch; a rank's later stages lighter, said in the legend), idle time
/// blank, each row's idle share ("bubble 23 %") at its right, a time axis in ms and a
/// legend. Deterministic: the same timeline gives the same bytes.
std::string timeline_svg(const Timeline& timeline);

}  // namespace ppctl::observe
