// `ppctl plan`: its CLI11 registration and its run (see plan_command.hpp). Torch-free.
#include "plan_command.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <optional>

#include "data/packed_corpus.hpp"
#include "cli_checks.hpp"
#include "command_line.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/echo.hpp"
#include "job/prepared_job.hpp"
#include "observe/timeline_svg.hpp"
#include "plan/parallel.hpp"
#include "schedule/report.hpp"
#include "schedule/simulate.hpp"
#include "schedule/split_time.hpp"
#include "schedule/zb_auto.hpp"
#include "tune/report.hpp"
#include "tune/search.hpp"

namespace ppctl::app {
namespace {

constexpr double kMaxMs = 1e9;    // the most ms any time option takes, as the spec's times (pipeline.zb_auto)
constexpr double kMinRate = 1e-3;  // --tp-bandwidth GB/s and --tflops TFLOP/s: from 1 MB/s, 1 GFLOP/s
constexpr double kMaxRate = 1e6;   // to 1 PB/s, 1 EFLOP/s: beyond them the tp term's ms over- or underflow

ppctl::schedule::CostModel cost_model(const PlanOptions& options) {
  ppctl::schedule::CostModel costs;
  if (options.costs.size() % 4 != 0) {
    throw ppctl::PlanError(fmt::format("--costs: {} values; give F,B,I,W for every stage (4 values) or for "
                                       "each stage in order (4 per stage)",
                                       options.costs.size()));
  }
  if (!options.costs.empty()) costs.stages.clear();
  for (size_t i = 0; i < options.costs.size(); i += 4) {
    costs.stages.push_back({options.costs[i], options.costs[i + 1], options.costs[i + 2], options.costs[i + 3]});
  }
  costs.p2p_latency = options.p2p_latency;
  costs.grad_reduce = options.grad_reduce_ms;
  for (auto& stage : costs.stages) stage.defer_penalty = options.defer_penalty;
  return costs;
}

/// zb-auto's own costs (pipeline.zb_auto), with --p2p-latency, --defer-penalty and --grad-reduce-ms applied.
ppctl::schedule::CostModel zb_auto_costs(const ppctl::schedule::ZbAutoPlan& zb, const PlanOptions& options) {
  auto costs = zb.costs;
  if (options.p2p_latency_given) costs.p2p_latency = options.p2p_latency;
  if (options.defer_penalty_given)
    for (auto& stage : costs.stages) stage.defer_penalty = options.defer_penalty;
  costs.grad_reduce = options.grad_reduce_ms;
  return costs;
}

/// --svg: the simulated step, or with --svg-from a step of that run's trace.json, drawn to options.svg_path.
/// Rows are named as the rank logs name ranks (replica 0's pipeline under data parallelism).
void write_svg(const PlanOptions& options, const ppctl::job::PreparedJob& planned,
               const ppctl::schedule::Simulation& simulation) {
  const auto& spec = planned.spec;
  const int64_t ranks = planned.program.num_ranks();
  const int64_t dp = std::max<int64_t>(planned.layout.data_parallel, 1);
  const int64_t tp = std::max<int64_t>(planned.layout.tensor_parallel, 1);
  // With dp or tp, replica 0's pipeline (its tp rank 0) is drawn, named by global rank.
  const std::string grid_line = ppctl::plan::RankGrid(tp, dp, ranks).describe();  // "tp 2 x pp 2 = 4 ranks; rank = ..."
  const std::string layout = dp * tp == 1 ? fmt::format("{} rank{}", ranks, ranks == 1 ? "" : "s")
                                          : fmt::format("{}; {} drawn", grid_line.substr(0, grid_line.find(';')),
                                                        tp > 1 ? "tp rank 0 of replica 0" : "replica 0");
  ppctl::observe::Timeline timeline;
  if (options.svg_from.empty()) {
    timeline = ppctl::observe::planned_timeline(
        simulation, fmt::format("{}: {}, {}, {} microbatches: simulated step {:.2f} ms", spec.source,
                                ppctl::config::to_string(spec.pipeline.schedule), layout,
                                planned.program.num_microbatches, simulation.step_time));
  } else {
    const auto file = (std::filesystem::path(options.svg_from) / "trace.json").string();
    timeline = ppctl::observe::measured_timeline(ppctl::core::read_file(file), file, options.svg_step, "");
    timeline.title = fmt::format("{}: step {} measured, {:.2f} ms{}", file, timeline.step, timeline.step_ms,
                                 dp * tp > 1 ? " (replica 0)" : "");
    if (static_cast<int64_t>(timeline.slices.size()) != ranks) {
      spdlog::warn("--svg-from {}: the run traced {} pipeline ranks, {} plans {}: the picture is the run's, drawn as "
                   "it ran",
                   options.svg_from, timeline.slices.size(), spec.source, ranks);
    }
  }
  if (options.svg_from.empty() || dp * tp > 1) {
    timeline.rank_names.clear();
    const ppctl::plan::RankGrid grid(tp, dp, std::max<int64_t>(ranks, static_cast<int64_t>(timeline.slices.size())));
    for (int64_t r = 0; r < static_cast<int64_t>(timeline.slices.size()); ++r)
      timeline.rank_names.push_back(ppctl::plan::replica0_rank_name(r, grid));
  }
  ppctl::core::write_file_atomically(options.svg_path, ppctl::observe::timeline_svg(timeline));
  std::cout << "timeline drawn to " << options.svg_path << " (open it in a browser)\n";
}

/// Before anything is planned: --svg names an .svg file that replaces no input or other output (the spec, the
/// trace it draws from, the --trace file), and --svg-from a run directory holding trace.json. Throws
/// ppctl::PlanError naming the option, its value and the fix.
void check_svg_target(const std::string& spec_path, const PlanOptions& options) {
  namespace fs = std::filesystem;
  const auto same = [](const std::string& a, const std::string& b) {
    std::error_code ec;
    if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
    return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
  };
  const std::string& svg = options.svg_path;
  std::string extension = fs::path(svg).extension().string();
  for (auto& c : extension) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (extension != ".svg") {
    throw ppctl::PlanError(fmt::format("--svg {}: the picture is SVG, but the name ends in '{}' (fix: name it "
                                       "{}.svg)",
                                       ppctl::core::echo_label(svg), ppctl::core::echo_label(extension),
                                       ppctl::core::echo_label(fs::path(svg).replace_extension().string())));
  }
  if (!options.svg_from.empty()) {
    const fs::path run(options.svg_from);
    std::error_code ec;
    if (!fs::exists(run, ec)) {
      throw ppctl::PlanError(fmt::format("--svg-from {}: no such folder (fix: give the run directory of a `ppctl "
                                         "train`, e.g. runs/<spec name>-<time>)",
                                         ppctl::core::echo_label(options.svg_from)));
    }
    if (!fs::is_directory(run, ec)) {
      throw ppctl::PlanError(fmt::format("--svg-from {}: a file, not a run directory (fix: give the folder{})",
                                         ppctl::core::echo_label(options.svg_from),
                                         run.filename() == "trace.json"
                                             ? " holding it: --svg-from " + ppctl::core::echo_label(
                                                                                  run.parent_path().string())
                                             : " that holds trace.json"));
    }
    if (!fs::is_regular_file(run / "trace.json", ec)) {
      throw ppctl::PlanError(fmt::format("--svg-from {}: no trace.json in it (fix: train with observe.trace_steps > "
                                         "0, and let the run end: a run killed before it ends merges no trace)",
                                         ppctl::core::echo_label(options.svg_from)));
    }
  }
  std::vector<std::pair<std::string, std::string>> others{{spec_path, "the spec"}};
  if (!options.svg_from.empty())
    others.push_back({(fs::path(options.svg_from) / "trace.json").string(), "the trace --svg-from reads"});
  if (!options.trace_path.empty()) others.push_back({options.trace_path, "the --trace file"});
  for (const auto& [path, what] : others) {
    if (same(svg, path)) {
      throw ppctl::PlanError(fmt::format("--svg {} is {} (fix: name another file for the picture)",
                                         ppctl::core::echo_label(svg), what));
    }
  }
}

/// `ppctl plan --tune`: the search on the prepared job, under its layer costs (or the FLOP model's).
int run_tune(const std::string& spec_path, ppctl::job::PreparedJob& planned, const PlanOptions& options) {
  ppctl::tune::TuneOptions tune;
  if (options.memory_gib > 0) {
    tune.memory_gib = options.memory_gib;
    tune.memory_source = fmt::format("--memory-gib {:g}", options.memory_gib);
  } else if (planned.spec.runtime.device_memory_gib > 0) {
    tune.memory_gib = planned.spec.runtime.device_memory_gib;
    tune.memory_source = "runtime.device_memory_gib, as the plan's memory warning";
  }
  if (!options.layer_costs.empty()) {
    std::vector<ppctl::schedule::GivenLayerCosts> probes;
    for (const auto& source : options.layer_costs)
      probes.push_back(ppctl::schedule::given_layer_costs(source, planned.spec, options.layer_costs.size() == 2));
    for (const auto& probe : probes)
      for (const auto& note : probe.notes) spdlog::warn("--layer-costs {}: {}", probe.source, note);
    tune.measured = true;
    if (probes.size() == 1) {
      tune.times = probes[0].times;
      tune.times_source = probes[0].source;
    } else {
      tune.affine = ppctl::tune::fit_affine(probes[0].times, probes[0].micro_batch_size, probes[0].source,
                                            probes[1].times, probes[1].micro_batch_size, probes[1].source);
      tune.times_source = fmt::format("{} (micro_batch_size {}) and {} (micro_batch_size {})", probes[0].source,
                                      probes[0].micro_batch_size, probes[1].source, probes[1].micro_batch_size);
    }
    // The host time of posting one transfer, from the probes' traces: the tuner's per-transfer cost.
    std::vector<double> posts;
    std::vector<std::string> from;
    for (const auto& probe : probes) {
      if (!probe.transfer_post_ms) continue;
      posts.push_back(*probe.transfer_post_ms);
      from.push_back(fmt::format("{:.4g} ms", *probe.transfer_post_ms));
    }
    for (size_t k = 0; k < probes.size(); ++k) {
      if (probes[k].run && probes[k].step_ms)
        tune.probe_runs.push_back({options.layer_costs[k], *probes[k].run, *probes[k].step_ms});
      else if (probes[k].run)
        tune.uncalibrated.push_back(fmt::format("{}: {}", options.layer_costs[k], probes[k].no_step));
    }
    if (!posts.empty()) {
      std::sort(posts.begin(), posts.end());
      tune.transfer_post = posts[(posts.size() - 1) / 2];
      tune.transfer_source = fmt::format("the median Post slice of the probe trace.json{} ({})",
                                         posts.size() > 1 ? " with the smaller median" : "", fmt::join(from, ", "));
    } else {
      tune.transfer_source = "no probe run directory traced transfers: taken as 0";
    }
  } else {
    tune.times = ppctl::plan::layer_times(ppctl::plan::flop_layer_costs(planned.spec.model), planned.spec.model.layers);
    tune.times_source = "FLOP model, no --layer-costs";
    tune.unit = "units of one block's forward";
  }
  tune.tp_comm = options.tp_comm;
  tune.tp_comm.given_micro_batch_size = planned.spec.pipeline.micro_batch_size;
  tune.p2p_latency = options.p2p_latency;
  tune.defer_penalty = options.defer_penalty;
  tune.grad_reduce = options.grad_reduce_ms;
  const auto base_dir = std::filesystem::absolute(spec_path).parent_path().string();
  const auto result = ppctl::tune::tune(planned.spec, planned.spec_text, base_dir, planned.layout, planned.program, tune);
  std::cout << ppctl::tune::format_tune(result, planned.spec, tune);
  return result.top.empty() ? kExitNothingFits : 0;
}

}  // namespace

CLI::App* add_plan_command(CLI::App& app, std::string& spec_path, PlanOptions& plan_options) {
  auto* plan = app.add_subcommand("plan", "Print the stage layout, simulated step and schedule; start nothing");
  plan->add_option("spec", spec_path, "Job spec (YAML)")->required();
  plan->add_flag("--comm", plan_options.with_communication, "Show communication actions too");
  plan->add_flag("--timeline", plan_options.timeline, "Print the simulated timeline per rank");
  plan->add_option("--trace", plan_options.trace_path,
                   "Write the simulated timeline as Chrome-trace/Perfetto JSON to this file")
      ->check(writable_file_check());
  plan->add_option("--costs", plan_options.costs,
                   "Costs of F,B,I,W in ms: 4 values for every stage, or 4 per stage in stage order "
                   "(default 1,2,1,1)")
      ->delimiter(',')
      ->expected(4, CLI::detail::expected_max_vector_size)
      ->check(number_check(0.0, true, kMaxMs));
  plan->add_flag("--balance", plan_options.balance,
                 "Lay out the stages as pipeline.balance: auto would (the spec is not edited)");
  plan->add_option("--layer-costs", plan_options.layer_costs,
                   "Per-layer times: a JSON costs file (ms per microbatch) or a previous run's run directory (fitted "
                   "to its trace); the split section compares the splits under them, --balance lays out with them. "
                   "With --tune it may be given twice, measured at two micro batch sizes: each time is then fitted "
                   "as a fixed part plus a part per sequence")
      ->excludes("--costs")->type_name("FILE|RUN_DIR")->expected(1)->take_all();
  plan->add_option("--p2p-latency", plan_options.p2p_latency, "Transfer latency between ranks, ms")
      ->check(number_check(0.0, false, kMaxMs))
      ->each([&plan_options](const std::string&) { plan_options.p2p_latency_given = true; });
  plan->add_option("--defer-penalty", plan_options.defer_penalty,
                   "What a W costs more when it does not run right after its I, ms (default 0; with schedule "
                   "zb-auto and no --costs, pipeline.zb_auto's)")
      ->check(number_check(0.0, false, kMaxMs))
      ->each([&plan_options](const std::string&) { plan_options.defer_penalty_given = true; });
  plan->add_option("--grad-reduce-ms", plan_options.grad_reduce_ms,
                   "Time of one stage's data-parallel gradient reduction, ms (runs beside compute: from the "
                   "stage's REDUCE_GRAD, or after the schedule with runtime.overlap_grad_reduce false)")
      ->check(number_check(0.0, false, kMaxMs));
  plan->add_option_function<double>(
          "--tp-collective-ms", [&plan_options](double ms) { plan_options.tp_comm.collective_ms = ms; },
          "Time of one tensor-parallel all-reduce of a microbatch's activations (micro_batch_size x seq_len x "
          "hidden), ms; an all-gather or reduce-scatter takes half (default: from the bytes at --tp-bandwidth)")
      ->check(number_check(0.0, false, kMaxMs))
      ->each([&plan_options](const std::string&) { plan_options.tp_comm_given = true; });
  plan->add_option("--tp-bandwidth", plan_options.tp_comm.bandwidth_gbps,
                   "Bus bandwidth of a tensor-parallel group's link, GB/s: times the tp collectives without "
                   "--tp-collective-ms (default 450, NVLink 4)")
      ->check(number_check(kMinRate, false, kMaxRate))
      ->each([&plan_options](const std::string&) { plan_options.tp_comm_given = true; });
  plan->add_option("--tflops", plan_options.tp_comm.tflops,
                   "Compute one GPU achieves, TFLOP/s: turns the FLOP model's forwards into ms to weigh the tp "
                   "collectives against them (default 400, Llama 3 405B's per H100)")
      ->check(number_check(kMinRate, false, kMaxRate))
      ->each([&plan_options](const std::string&) { plan_options.tp_comm_given = true; });
  auto* tune = plan->add_flag("--tune", plan_options.tune,
                               "Search schedule, microbatches, split and recompute for the fastest configurations "
                               "that fit; print the top 5 with the spec lines for each (exit 4: none fits)");
  auto* svg = plan->add_option("--svg", plan_options.svg_path,
                               "Draw the timeline as an SVG picture in this file: the simulated step, or with "
                               "--svg-from a measured one; ranks by time, F/B/I/W coloured, bubbles blank")
                  ->check(writable_file_check("plan.svg"));
  auto* svg_from = plan->add_option("--svg-from", plan_options.svg_from,
                                    "With --svg: draw a step of this run directory's trace.json (measured) "
                                    "instead of the simulated step")
                       ->type_name("RUN_DIR")
                       ->check(CLI::Validator(
                           [](std::string& dir) -> std::string {
                             return dir.empty() ? "the run directory is empty (fix: name the run directory of a "
                                                  "`ppctl train`, or leave --svg-from out for the simulated step)"
                                                : "";
                           },
                           "RUN_DIR"))
                       ->needs(svg);
  plan->add_option("--svg-step", plan_options.svg_step,
                   "With --svg-from: the traced step to draw (default: the last step every rank traced)")
      ->check(integer_check(1, 1'000'000'000))
      ->needs(svg_from);
  tune->excludes("--costs")->excludes("--balance")->excludes("--timeline")->excludes("--trace")->excludes("--comm")
      ->excludes(svg);
  plan->add_option("--memory-gib", plan_options.memory_gib,
                   "With --tune: the most GiB a pipeline rank may hold (default runtime.device_memory_gib)")
      ->check(number_check(0.0, true))
      ->needs(tune);
  return plan;
}

int run_plan(const std::string& spec_path, const PlanOptions& options) {
  if (options.layer_costs.size() > (options.tune ? 2u : 1u)) {
    throw ppctl::PlanError(fmt::format("--layer-costs given {} times; give it once{} (fix: drop the extra ones)",
                                       options.layer_costs.size(),
                                       options.tune ? ", or twice with --tune (two micro batch sizes)" : " without --tune"));
  }
  if (!options.svg_path.empty()) check_svg_target(spec_path, options);
  auto planned = ppctl::job::prepare_job(spec_path);
  if (options.tune) return run_tune(spec_path, planned, options);
  if (options.balance) {
    if (!planned.spec.pipeline.layers_per_stage.empty()) {
      spdlog::warn("--balance: the spec's pipeline.layers_per_stage [{}] is set aside for this plan; the job "
                   "itself would run with it",
                   fmt::join(planned.spec.pipeline.layers_per_stage, ", "));
    }
    ppctl::job::use_balance_auto(planned);
  }
  std::optional<ppctl::schedule::GivenLayerCosts> layer_costs;
  if (!options.layer_costs.empty())
    layer_costs = ppctl::job::use_layer_costs(planned, options.layer_costs.front(), options.balance);
  std::optional<ppctl::schedule::ZbAutoPlan> zb_auto;
  if (planned.spec.pipeline.schedule == ppctl::config::ScheduleKind::ZBAuto)
    zb_auto = ppctl::schedule::plan_zb_auto(ppctl::schedule::schedule_params(planned.spec));
  auto costs = layer_costs ? ppctl::schedule::job_cost_model(planned.spec, planned.layout, layer_costs->times,
                                                            options.p2p_latency, options.grad_reduce_ms)
               : zb_auto && options.costs.empty() ? zb_auto_costs(*zb_auto, options)
                                                  : cost_model(options);
  if (layer_costs)
    for (auto& stage : costs.stages) stage.defer_penalty = options.defer_penalty;
  auto tp_comm = options.tp_comm;
  tp_comm.given_micro_batch_size = planned.spec.pipeline.micro_batch_size;
  ppctl::schedule::add_plan_tp_collectives(
      costs, planned.spec, planned.layout, tp_comm,
      layer_costs || !options.costs.empty() || zb_auto ? ppctl::schedule::PlanCosts::Measured
                                                       : ppctl::schedule::PlanCosts::Default);
  if (options.tp_comm_given && planned.spec.pipeline.tensor_parallel <= 1) {  // said, not silently dropped
    costs.tp_collectives = "none at tensor_parallel 1: --tp-collective-ms, --tp-bandwidth and --tflops cost the "
                           "collectives of tp > 1 (and of --tune's candidates at tp > 1)";
  }
  const auto simulation = ppctl::schedule::simulate(planned.program, costs);
  std::cout << ppctl::data::with_packing(
      planned.spec, ppctl::schedule::format_plan(planned.spec, planned.layout, planned.program, simulation, costs,
                                                 options.with_communication, layer_costs ? &*layer_costs : nullptr));
  if (zb_auto) {
    std::cout << '\n' << ppctl::schedule::format_zb_auto(*zb_auto);
    if (layer_costs || !options.costs.empty())
      std::cout << "  (the simulated step above is under " << (layer_costs ? "--layer-costs" : "--costs")
                << "; W was placed for pipeline.zb_auto's costs, which the job runs with)\n";
  }
  if (options.timeline) std::cout << '\n' << ppctl::schedule::format_timeline(simulation);
  if (!options.trace_path.empty()) {
    ppctl::core::write_file_atomically(options.trace_path,
                                       ppctl::schedule::to_chrome_trace(simulation));
    std::cout << "trace written to " << options.trace_path << " (open it in https://ui.perfetto.dev)\n";
  }
  if (!options.svg_path.empty()) write_svg(options, planned, simulation);
  return 0;
}

}  // namespace ppctl::app
