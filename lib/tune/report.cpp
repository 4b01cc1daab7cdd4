// The text of `ppctl plan --tune`.
#include "tune/report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace ppctl::tune {
namespace {

/// Bytes as GiB, MiB below 1 GiB, KiB below 1 MiB, 2 decimals.
std::string gib(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024.0 * 1024.0) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024.0 * 1024.0));
  if (b >= 1024.0 * 1024.0) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024.0));
  return fmt::format("{:.2f} KiB", b / 1024.0);
}

/// Every line of `text` indented by `indent`.
std::string indented(const std::string& text, const std::string& indent) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    out += indent + text.substr(start, end - start) + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

/// "tp comm   at the largest tp searched, tp 8 with sequence parallelism: per block ...; one all-reduce in the unit: tp 2 0.031, ..., added
/// to F, B and I by their counts ...", for the tp sizes searched above 1; "" when none is.
std::string tp_comm_line(const config::JobSpec& spec, const TuneOptions& options, const std::vector<int64_t>& tps) {
  const int64_t spec_tp = tps.front(), mbs = spec.pipeline.micro_batch_size;
  std::vector<std::string> costs;
  config::JobSpec shown = spec;
  for (const int64_t tp : tps) {
    if (tp == 1) continue;
    auto candidate = spec;
    candidate.pipeline.tensor_parallel = tp;
    costs.push_back(fmt::format("tp {} {:.4g}", tp, tp_all_reduce_cost(options, mbs, spec_tp, candidate)));
    shown = candidate;
  }
  if (costs.empty()) return "";
  const std::string held = !options.measured
                               ? fmt::format(" (its ms over one block forward's at the spec's micro_batch_size and "
                                             "tp, the block's FLOPs at {:g} TFLOP/s, --tflops)",
                                             options.tp_comm.tflops)
                           : options.tp_comm.collective_ms
                               ? "; the measured times taken to hold none (--tp-collective-ms given)"
                               : fmt::format("; the measured times hold tp {}'s, so only what another tp adds is "
                                             "added (--tp-collective-ms MS: all of it)",
                                             spec_tp);
  return fmt::format("tp comm   at the largest tp searched, {}; one all-reduce in {} at micro_batch_size {} (in "
                     "proportion to it): {}; added to "
                     "F, B and I by their counts{}\n",
                     plan::describe_tp_collectives(shown, options.tp_comm), options.unit, mbs, fmt::join(costs, ", "),
                     held);
}

}  // namespace

std::string format_tune(const TuneResult& result, const config::JobSpec& spec, const TuneOptions& options) {
  const auto& p = spec.pipeline;
  const int64_t batch = p.microbatches * p.micro_batch_size;
  std::string out = fmt::format("tune      {}: p {}, dp {}{}, {} sequences per replica per step (m x micro_batch_size)\n",
                                spec.source, p.stages, std::max<int64_t>(p.data_parallel, 1),
                                p.tensor_parallel > 1 ? fmt::format(", tp {}", p.tensor_parallel) : std::string(),
                                batch);
  if (options.affine) {
    const auto& fit = *options.affine;
    out += fmt::format("costs     {} ({}), per microbatch, each piece fitted as a + c x micro_batch_size through "
                       "the probes at micro_batch_size {} and {} (a candidate at a probed size gets that probe's "
                       "times); recompute adds the stage's forward to B and I\n",
                       options.times_source, options.unit, fit.low_mbs, fit.high_mbs);
    for (const auto& line : fit.clamped) out += fmt::format("  clamped {}\n", line);
  } else {
    out += fmt::format("costs     {} ({}), per microbatch at micro_batch_size {}, taken as proportional to it: this "
                       "ignores each action's fixed cost (per-op overhead, small GEMMs), so many small microbatches "
                       "look faster than they run (fix: give --layer-costs twice, the second measured at another "
                       "pipeline.micro_batch_size such as 1); recompute adds the stage's forward to B and I\n",
                       options.times_source, options.unit, p.micro_batch_size);
  }
  out += fmt::format("transfers posting {:.4g} {} per SEND or RECV on the rank's thread ({}); p2p latency {:g}, "
                     "defer penalty {:g}\n",
                     options.transfer_post, options.unit, options.transfer_source.empty() ? "not measured" : options.transfer_source,
                     options.p2p_latency, options.defer_penalty);
  const auto& calibration = result.calibration;
  if (calibration.calibrated()) {
    std::vector<std::string> checks;
    for (const auto& c : calibration.probes)
      checks.push_back(fmt::format("{} (mbs {}, {} compute actions on the busiest rank): measured {:.2f}, simulated "
                                   "{:.2f}",
                                   c.source, c.micro_batch_size, c.actions, c.measured, c.simulated));
    out += fmt::format("calibrated predicted step = simulated step {:+.4g} {} {:+.4g} {} x the compute actions of the "
                       "busiest rank{}, fitted on the probes' measured step less the step simulated for their own "
                       "configuration ({}): the time outside the simulated schedule (optimizer step, norm and loss "
                       "all-reduces, data) and the host time between actions the simulator leaves out (on a shared "
                       "CPU, ranks competing for cores); configurations are ranked by it\n",
                       calibration.fixed_ms, options.unit, calibration.per_action_ms, options.unit,
                       calibration.per_action_ms > 0.0
                           ? fmt::format(" (at least {}: the fewest of the probes)", calibration.least_actions)
                           : std::string(),
                       fmt::join(checks, "; "));
    if (!calibration.clamped.empty()) out += fmt::format("  clamped {}\n", calibration.clamped);
  } else if (options.measured) {
    out += "calibrated no: no probe run directory with a measured step (metrics.jsonl; a costs file has none); "
           "configurations are ranked by the simulated schedule alone\n";
  }
  for (const auto& line : calibration.skipped) out += fmt::format("  not calibrated on {}\n", line);
  const auto predicted = [&](double step) {
    return calibration.calibrated() ? fmt::format(", predicted {:.2f}", step) : std::string();
  };
  out += options.memory_gib > 0
             ? fmt::format("memory    at most {:g} GiB per pipeline rank ({})\n", options.memory_gib, options.memory_source)
             : std::string("memory    no limit (runtime.device_memory_gib is not set; --memory-gib N sets one)\n");
  const auto tps = tensor_parallel_candidates(spec);
  const int64_t spec_tp = tps.front(), ranks = spec_tp * std::max<int64_t>(p.data_parallel, 1);
  std::string tp_text;
  if (tps.size() > 1) {
    tp_text = fmt::format("tp {} (tp x dp = {} kept: tp takes its ranks from dp and each replica runs tp / {} times "
                          "the sequences; a layer's time divided by tp / {}, its tp collectives added: `tp comm`)",
                          fmt::join(tps, ", "), ranks, spec_tp, spec_tp);
  } else if (p.data_parallel < 1) {
    tp_text = fmt::format("tp {} only (pipeline.data_parallel 0 is derived at launch: no dp to trade for tp)", spec_tp);
  } else {
    tp_text = fmt::format("tp {} only (no other tp up to {} divides tp x dp = {} and the model's heads, kv_heads "
                          "and ffn width)",
                          spec_tp, kMostTensorParallel, ranks);
  }
  out += tp_comm_line(spec, options, tps);
  out += fmt::format("searched  {}; gpipe, 1f1b, interleaved-1f1b v 2-4, zb-h1, zbv, zb-auto; m dividing {}{}; uniform, "
                     "auto{} split; recompute none, full, blocks (every {})\n",
                     tp_text, batch, tps.size() > 1 ? " x tp / the spec's tp" : "", options.measured ? ", measured" : "",
                     spec.train.recompute_every);
  out += fmt::format("kept      runtime.precision {} and optimizer.distributed {}: the cost model does not predict "
                     "their time, so they change only where a configuration does not fit otherwise (memory levers)\n",
                     config::to_string(spec.runtime.precision), spec.optimizer.distributed ? "true" : "false");
  if (result.top.empty()) {
    out += fmt::format("\nno configuration fits: none of the {} candidates passed the rules and the memory limit "
                       "(see below; fix: a larger --memory-gib, more pipeline stages or data-parallel replicas)\n",
                       result.candidates);
  } else {
    out += fmt::format("\ntop {} by {} step ({}):\n", result.top.size(),
                       calibration.calibrated() ? "predicted" : "simulated", options.unit);
    int rank = 1;
    for (const auto& e : result.top) {
      const bool beyond = options.affine && extrapolated(*options.affine, e.knobs.micro_batch_size);
      out += fmt::format("{:2}. step {:.2f}{}, bubble {:.3f}, peak {} per rank (pp rank {})  {}{}{}\n", rank++,
                         e.simulated, predicted(e.step), e.bubble, gib(e.peak_bytes), e.peak_rank, describe(e.knobs),
                         e.lever.empty() ? "" : fmt::format(", with {} (memory lever: its time not modelled)", e.lever),
                         beyond ? fmt::format(", times extrapolated (mbs outside the probed {}-{})",
                                              options.affine->low_mbs, options.affine->high_mbs)
                                : "");
      out += indented(yaml_lines(e.changes), "      ");
    }
  }
  if (result.own.ranked) {
    out += fmt::format("\nthe spec's own configuration ({}, m {} x mbs {}, recompute {}): step {:.2f}{}, bubble {:.3f}, "
                       "peak {} per rank{}; rank {} ({} of the {} ranked candidates faster)\n",
                       config::to_string(p.schedule), p.microbatches, p.micro_batch_size,
                       config::to_string(spec.train.recompute), result.own.simulated, predicted(result.own.step),
                       result.own.bubble,
                       gib(result.own.peak_bytes), result.own.fits ? "" : " (does not fit the memory limit)",
                       result.own.rank, result.own.rank - 1, result.ranked);
  } else {
    out += fmt::format("\nthe spec's own configuration: not ranked ({})\n", result.own.why_not);
  }
  int64_t out_count = 0;
  for (const auto& [reason, count] : result.ruled_out) out_count += count;
  out += fmt::format("\n{} candidates: {} simulated, {} ranked (fit); ruled out or not simulated: {}\n",
                     result.candidates, result.simulated, result.ranked, out_count);
  for (const auto& [reason, count] : result.ruled_out) out += fmt::format("  {:6}  {}\n", count, reason);
  return out;
}

}  // namespace ppctl::tune
