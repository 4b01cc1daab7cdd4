// `ppctl plan --tune`: the search over schedule, microbatch count, split and recompute for the fastest
// configurations that fit a memory limit, each checked by the spec's rules, simulated (schedule::simulate)
// and estimated (schedule::estimate_memory). No torch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.hpp"
#include "plan/layer_times.hpp"
#include "plan/layout.hpp"
#include "plan/tp_collectives.hpp"
#include "schedule/action.hpp"
#include "schedule/simulate.hpp"
#include "tune/affine.hpp"
#include "tune/candidate.hpp"

namespace ppctl::tune {

/// A probe run whose measured step calibrates the tuner's steps (a --layer-costs run directory).
struct ProbeRun {
  std::string source;       ///< how it is named in the output (its folder)
  config::JobSpec spec;     ///< its own configuration (its config.yaml)
  double measured_ms = 0.0; ///< its median measured step, ms (schedule::metrics_step_ms)
};

/// What the search is given besides the spec.
struct TuneOptions {
  double memory_gib = 0.0;    ///< most GiB (2^30 bytes) a pipeline rank may hold (RankMemory::total); 0 = no limit
  std::string memory_source;  ///< where the limit came from (`--memory-gib`, `runtime.device_memory_gib`)
  plan::LayerTimes times;     ///< per-layer times per microbatch at the spec's micro_batch_size (one probe)
  std::optional<AffineTimes> affine;  ///< two probes (two --layer-costs): used instead of `times` when set
  std::string times_source;   ///< where they came from, for the output
  bool measured = false;      ///< `times` were measured (--layer-costs): the measured split is searched too
  std::string unit = "ms";    ///< the unit of `times` and of every step printed
  double p2p_latency = 0.0;   ///< CostModel::p2p_latency
  double transfer_post = 0.0; ///< CostModel::transfer_post (a probe trace's median Post slice)
  std::string transfer_source;  ///< where transfer_post came from, for the output
  double defer_penalty = 0.0; ///< StageCosts::defer_penalty of every stage
  double grad_reduce = 0.0;   ///< CostModel::grad_reduce
  plan::TpCommOptions tp_comm;  ///< how a tensor-parallel collective is timed (tp_all_reduce_cost)
  int64_t top = 5;            ///< configurations listed
  std::vector<ProbeRun> probe_runs;  ///< probes with a measured step: the search's calibration (calibrate())
  std::vector<std::string> uncalibrated;  ///< probe run directories without one: "SOURCE: why", one line each
};

/// One configuration simulated.
struct Evaluated {
  Knobs knobs;
  std::vector<Change> changes;  ///< the spec lines that select it (memory lever included)
  double lower_bound = 0.0;     ///< lower_bound() of its program and costs
  double step = 0.0;            ///< the step ranked: simulated + TuneResult::calibration.at(its compute actions)
  double simulated = 0.0;       ///< Simulation::step_time, TuneOptions::unit
  double bubble = 0.0;          ///< Simulation::mean_bubble_fraction
  int64_t peak_bytes = 0;       ///< the largest schedule::RankMemory::total over its pipeline ranks
  int64_t peak_rank = 0;        ///< the pipeline rank holding it
  std::string lever;            ///< the memory lever it needed to fit (`optimizer.distributed: true`), or ""
  int64_t order = 0;            ///< enumeration order: ties in step and peak go to the smaller
};

/// The spec's own configuration, simulated and estimated as a candidate is.
struct OwnConfiguration {
  bool ranked = false;  ///< false for a custom schedule (why_not says so)
  std::string why_not;
  double step = 0.0;       ///< as Evaluated::step
  double simulated = 0.0;  ///< as Evaluated::simulated
  double bubble = 0.0;
  int64_t peak_bytes = 0;
  bool fits = true;     ///< within TuneOptions::memory_gib
  int64_t rank = 0;     ///< 1 + the candidates ranked with a strictly smaller step
};

/// A probe's measured step against the step the search simulates for its own configuration.
struct ProbeCheck {
  std::string source;
  int64_t micro_batch_size = 0;
  int64_t actions = 0;     ///< compute_actions of its program
  double measured = 0.0;   ///< ProbeRun::measured_ms
  double simulated = 0.0;  ///< simulated under the search's cost model, as a candidate with its knobs would be
};

/// The time a measured step takes beyond its simulated schedule, fitted on the probes as fixed_ms +
/// per_action_ms x n (n = compute_actions of the program): the work outside the schedule (optimizer step,
/// gradient-norm and loss all-reduces, data) and what the simulator leaves out, which grows with the
/// actions a rank runs (the host time between actions; on a shared CPU, ranks competing for cores).
struct Calibration {
  std::vector<ProbeCheck> probes;    ///< one per probe run whose configuration could be simulated
  std::vector<std::string> skipped;  ///< a probe run left out and why, one line each
  std::string clamped;               ///< why per_action_ms was set to 0 (the probes disagreed), or ""
  double fixed_ms = 0.0;             ///< 0 without any probe
  double per_action_ms = 0.0;        ///< 0 with one probe (or two with the same n)
  int64_t least_actions = 0;         ///< the smaller probe's n: below it the per-action part is held there
  bool calibrated() const { return !probes.empty(); }
  /// The time added to the simulated step of a program with `actions` compute actions on its busiest rank:
  /// fixed + per_action x max(actions, least_actions) (fewer actions than any probe are not extrapolated
  /// down, where the fit's fixed part may be negative).
  double at(int64_t actions) const {
    return fixed_ms + per_action_ms * static_cast<double>(std::max(actions, least_actions));
  }
};

/// The most compute actions (F, B, I, W) any rank of `program` runs in one step.
int64_t compute_actions(const schedule::Program& program);

/// What the search found.
struct TuneResult {
  std::vector<Evaluated> top;   ///< the fastest that fit, at most TuneOptions::top, by (step, peak, order)
  int64_t candidates = 0;       ///< configurations enumerated (zb-auto ones included)
  int64_t simulated = 0;        ///< simulated and estimated
  int64_t ranked = 0;           ///< of those, the ones that fit
  std::vector<std::pair<std::string, int64_t>> ruled_out;  ///< reason and count, most first (then by reason)
  OwnConfiguration own;
  Calibration calibration;      ///< how Evaluated::step was predicted from the simulated step
};

/// A lower bound of simulate(program, costs).step_time: max over ranks of the forwards that must run on
/// earlier stages before the rank's first stage can start (sum of F of the stages before it), plus the
/// rank's own compute (m x (F + min(B, I + W)) over its stages), plus the chain of actions that must follow
/// its last compute action (after a B or I of stage s, min(B, I) of every stage below s; after an F, the
/// later stages' F and every stage's min(B, I); after a W, nothing). For 1F1B with equal costs this is its
/// step, (m + p - 1)(F + B). Transfers, deferred-W penalties and idle time only add to the real step.
double lower_bound(const schedule::Program& program, const schedule::CostModel& costs);

/// Simulates each of options.probe_runs' own configuration (schedule::job_program, job_layout, and the
/// cost model the search gives a candidate at its micro batch size) and fits measured - simulated as
/// fixed + per_action x compute_actions: through both probes when their action counts differ (a negative
/// per-action slope, the probes disagreeing with the model, is clamped to 0 and fixed is their mean, named in
/// Calibration::clamped), else fixed = the mean difference. A probe whose configuration cannot be laid out
/// again, whose micro batch size the search does not cost, or whose measured step is not within 0.5-10 x its
/// simulated step (its metrics and trace disagree), is skipped with the reason, after options.uncalibrated. The idea of
/// taking the scheduler's costs from a profiled run is Zero Bubble's (arXiv 2401.10241 §3); the fit is ours.
Calibration calibrate(const config::JobSpec& spec, const TuneOptions& options);

/// The most tensor-parallel ranks a candidate gets: the GPUs of one node (a tp group's all-reduces stay on NVLink).
inline constexpr int64_t kMostTensorParallel = 8;

/// The tensor-parallel sizes the search tries, the spec's first: every tp <= kMostTensorParallel the model allows
/// (plan::tensor_parallel_sizes: heads, kv_heads and the ffn width divisible; the rules check each candidate
/// again) that is a multiple of the spec's tp and divides tp x dp, which stays the spec's (tp takes its ranks from
/// dp). Only the spec's own when pipeline.data_parallel is 0 (derived at launch).
std::vector<int64_t> tensor_parallel_candidates(const config::JobSpec& spec);

/// One tensor-parallel all-reduce of a microbatch's activations for `candidate` (a configuration of the spec
/// searched, whose micro_batch_size is `spec_mbs` and tensor_parallel `spec_tp`), in options.unit: what
/// schedule::add_tp_collectives adds per counted collective. plan::tp_all_reduce_ms of the candidate (its t and
/// micro batch size; options.tp_comm). Under the FLOP model (options.measured false) divided by the ms of one
/// block's forward at the spec's micro_batch_size and tp (plan::forward_ms of plan::block_forward_flops at
/// options.tp_comm.tflops), the unit the times are in. Measured times are ms as measured at the spec's tp: without
/// tp_comm.collective_ms they hold the spec's own collectives, scaled by spec_tp / t with the rest of the times,
/// so only the rest is added: tp_all_reduce_ms(candidate) - spec_tp / t x tp_all_reduce_ms(candidate at spec_tp)
/// (none at the spec's tp); with it given, the times are taken to hold none and all of it is added. 0 at t = 1.
double tp_all_reduce_cost(const TuneOptions& options, int64_t spec_mbs, int64_t spec_tp,
                          const config::JobSpec& candidate);

/// Every divisor of `n` (>= 1), ascending.
std::vector<int64_t> divisors(int64_t n);

/// `times` with every forward and backward multiplied by `factor` (a micro batch size against the one they
/// were measured at: the tuner takes a microbatch's time as proportional to its sequences).
plan::LayerTimes scaled(const plan::LayerTimes& times, double factor);

/// The times per microbatch a candidate of micro batch size `mbs` is costed with: times_at(affine) with two
/// probes, else `times` scaled by mbs / `spec_mbs` (the spec's micro_batch_size; proportional model).
plan::LayerTimes candidate_times(const TuneOptions& options, int64_t mbs, int64_t spec_mbs);

/// The search (docs/planning.md, "Letting ppctl choose"). Candidates: the tensor-parallel sizes of
/// tensor_parallel_candidates, each with dp = the spec's tp x dp / tp and the sequences per replica scaled by tp /
/// the spec's tp (the ranks and the global batch stay the spec's), its layer times divided by tp / the spec's tp
/// (each rank computes its share of a layer) and its collectives added (tp_all_reduce_cost); schedules gpipe, 1f1b,
/// interleaved-1f1b with v 2, 3, 4, zb-h1, zbv, and zb-auto; every m dividing the global batch per replica
/// (m x micro_batch_size of `spec`, at the candidate's tp) with micro_batch_size = that batch / m (with two probes, only sizes affine.hpp's searched() takes;
/// the others counted as ruled out); the uniform split, balance auto's, and with measured times
/// schedule::balance_by_times's; train.recompute none, full, blocks (recompute_every as the spec's). Each is
/// the spec's YAML with its lines applied, validated by config::parse_job_spec and schedule::job_program
/// (refused ones counted by rule), laid out by schedule::job_layout and costed by schedule::job_cost_model
/// on candidate_times at its micro batch size. Each step is ranked as predicted: the simulated step plus
/// calibrate(spec, options).at(its compute_actions) (0 without probe runs), and each bound carries the same
/// addition. Ordered by lower_bound, candidates are simulated and estimated
/// until the bound passes both the top-th best step found and the spec's own step (the rest counted as
/// pruned). A candidate over the memory limit is tried with the memory levers whose time the cost model does
/// not predict (optimizer.distributed with dp > 1, runtime.precision bf16-params, both, bf16 from fp32), the first
/// that fits.
/// zb-auto is placed (its W from the candidate's own stage costs F, I, W and B, written as pipeline.zb_auto
/// f, i, w and b, with the split as pipeline.layers_per_stage) for the m, split and recompute of each 1f1b and zb-h1 in the top list,
/// when p x m <= 131072, and ranked when strictly faster than that entry. `spec_text` and `base_dir` are the spec's YAML and folder; `layout` and `program`
/// the spec's own (job::prepare_job). Deterministic. Throws ppctl::ConfigError when `spec_text` is not a
/// YAML mapping.
TuneResult tune(const config::JobSpec& spec, const std::string& spec_text, const std::string& base_dir,
                const plan::Layout& layout, const schedule::Program& program, const TuneOptions& options);

}  // namespace ppctl::tune
