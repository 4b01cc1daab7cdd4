// Per-layer times for `ppctl plan --layer-costs SOURCE`: from a costs file (plan/cost_file.hpp), or fitted
// to what a previous run measured (its run directory's trace.json and config.yaml). No torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "plan/layer_times.hpp"

namespace ppctl::schedule {

/// Per-layer times given to `ppctl plan`, and where they came from.
struct GivenLayerCosts {
  plan::LayerTimes times;
  std::string source;                            ///< e.g. "costs file c.json", "run directory runs/x (...)"
  std::vector<std::string> notes;                ///< assumptions made and differences found, one line each
  std::vector<plan::StageMeasurement> measured;  ///< a run's blocks and median times per stage (none for a file)
  bool balanced = false;  ///< the job is laid out with these times (`ppctl plan --balance`): balance_by_times
  int64_t micro_batch_size = 0;  ///< the micro batch size the times are per microbatch of
  std::optional<double> transfer_post_ms;  ///< a run's median Post slice (posting one send or receive), ms
  std::optional<config::JobSpec> run;      ///< a run directory's own spec (its config.yaml); none for a file
  std::optional<double> step_ms;  ///< a run's measured step: metrics_step_ms of its metrics.jsonl, ms
  std::string no_step;            ///< a run directory without step_ms: why (for the tuner's output)
};

/// Median time per action of each stage in a merged trace.json (runtime/trace.hpp's layout: complete
/// "X" events with cat F, B, I or W and args.stage, args.step), over the traced steps after the first
/// (which carries start-up costs; all of them when one step was traced): F, and B (or I + W when the
/// backward was split). `first_step`/`last_step` receive the steps used. Throws ppctl::PlanError naming
/// `source` when the text is not such a trace or a stage of [0, num_stages) has no F or backward.
std::vector<plan::PieceTime> trace_stage_times(const std::string& trace_text, const std::string& source,
                                               int64_t num_stages, int64_t& first_step, int64_t& last_step);

/// The per-layer times a previous run measured: its config.yaml (validated as a job spec, relative paths
/// against the folder of `spec.source`) gives its layout, its trace.json the median F and B per stage,
/// and plan::fit_layer_times the times per block, embedding and head. Throws ppctl::PlanError naming the
/// folder and the fix when it is not a run directory, its model differs from `spec`'s (arch, layers,
/// hidden, heads, kv_heads, ffn_hidden, vocab_size, seq_len) or its pipeline.micro_batch_size does, it
/// has no trace (observe.trace_steps 0), or it ran one stage. Runtime differences (device, precision,
/// recompute, threads per worker) become notes.
/// With `any_micro_batch_size` (`ppctl plan --tune`'s probes) a run at another micro batch size is taken,
/// its size in GivenLayerCosts::micro_batch_size. GivenLayerCosts::transfer_post_ms is trace_post_ms's,
/// GivenLayerCosts::run the run's spec and GivenLayerCosts::step_ms metrics_step_ms's from the trace's first
/// step used on, never from step 1 (none without metrics.jsonl, or when the run had one step).
GivenLayerCosts run_layer_costs(const std::string& run_dir, const config::JobSpec& spec,
                                bool any_micro_batch_size = false);

/// The median duration (ms) of the Post slices (cat `send` or `recv`: posting one transfer on the rank's
/// thread) of a merged trace.json over steps >= `first_step`; nullopt when it has none (one stage, or an
/// older trace). The text must be JSON (trace_stage_times has checked it).
std::optional<double> trace_post_ms(const std::string& trace_text, int64_t first_step);

/// The median wall time of one training step (ms) in a run's metrics.jsonl (observe/metrics_log.hpp: one JSON
/// object per line; `"event": "step"` records carry `step`, `step_time_s` and `skipped`) over the steps >=
/// `first_step` that were not skipped; nullopt when there is none. Lines that are not such records (the end
/// record, a torn last line) and step times outside (0, 1e9] ms (NaN, hand-edited values) are passed over.
std::optional<double> metrics_step_ms(const std::string& metrics_text, int64_t first_step);

/// `--layer-costs SOURCE`: run_layer_costs for a folder, else plan::read_cost_file. Throws
/// ppctl::PlanError as they do.
/// A costs file's micro batch size is its optional "micro_batch_size" key, else the spec's.
GivenLayerCosts given_layer_costs(const std::string& source, const config::JobSpec& spec,
                                  bool any_micro_batch_size = false);

}  // namespace ppctl::schedule
