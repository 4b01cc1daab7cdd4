// `ppctl plan`: its command-line options (CLI11) and what it runs. Torch-free, so that both executables
// share it: the light `ppctl`, which plans without loading LibTorch, and `ppctl-torch` (every command).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "plan/tp_collectives.hpp"

namespace CLI {
class App;
}

namespace ppctl::app {

/// The options of `ppctl plan` (beside the spec path).
struct PlanOptions {
  bool with_communication = false;
  bool timeline = false;
  std::string trace_path;
  std::vector<double> costs;  // F, B, I, W in ms; once, or once per stage
  double p2p_latency = 0.0;
  bool p2p_latency_given = false;  // --p2p-latency was written (zb-auto: it replaces pipeline.zb_auto's)
  double defer_penalty = 0.0;  // --defer-penalty: ms more for a W not right after its I
  bool defer_penalty_given = false;
  double grad_reduce_ms = 0.0;  // --grad-reduce-ms: one stage's data-parallel gradient reduction
  // --tp-collective-ms, --tp-bandwidth, --tflops: how a tensor-parallel collective is timed (given_micro_batch_size
  // is set from the spec)
  ppctl::plan::TpCommOptions tp_comm;
  bool tp_comm_given = false;  // --tp-collective-ms, --tp-bandwidth or --tflops was written
  bool balance = false;  // show the layout of pipeline.balance auto
  std::vector<std::string> layer_costs;  // --layer-costs: costs files or previous runs' run directories (2: --tune's probes)
  bool tune = false;        // --tune: search for the fastest configurations that fit (tune/search.hpp)
  double memory_gib = 0.0;  // --memory-gib: the tuner's limit per pipeline rank, GiB; 0 = runtime.device_memory_gib
  std::string svg_path;     // --svg: draw the timeline (simulated, or --svg-from's measured step) as SVG
  std::string svg_from;     // --svg-from: a run directory whose trace.json gives the measured timeline
  std::optional<int64_t> svg_step;  // --svg-step: which traced step --svg-from draws (default the last complete one)
};

/// Adds the `plan` subcommand to `app`; parsing writes the spec path into `spec_path` and the options into
/// `options` (both must outlive `app.parse`). Returns the subcommand (true after parsing when it was given).
CLI::App* add_plan_command(CLI::App& app, std::string& spec_path, PlanOptions& options);

/// Runs `ppctl plan`: prepares the job (job::prepare_job: the whole spec validated, the program built and
/// checked), simulates one step and prints the plan to stdout (plus the timeline, the trace file and the SVG
/// timeline, observe/timeline_svg.hpp, as asked).
/// With schedule zb-auto it also prints how W was placed (schedule::format_zb_auto), and without --costs or
/// --layer-costs simulates with pipeline.zb_auto's costs (--p2p-latency and --defer-penalty replace theirs).
/// With --tune it prints the tuner's report instead (tune::format_tune) and returns 4 when no configuration fits.
/// Returns 0; throws ppctl::ConfigError, ppctl::PlanError or ppctl::ScheduleError for bad input (the caller
/// maps them to exit code 2).
int run_plan(const std::string& spec_path, const PlanOptions& options);

}  // namespace ppctl::app
