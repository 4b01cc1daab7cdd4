// `ppctl plan --tune`: the search over schedule, microbatch count, split and recompute for the fastest
// configurations that fit a memory limit, each checked by the spec's rules, simulated (schedule::simulate)
// and estimated (schedule::estimate_memory). No torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.hpp"
#include "plan/layer_times.hpp"
#include "plan/layout.hpp"
#include "schedule/action.hpp"
#include "schedule/simulate.hpp"
#include "tune/affine.hpp"
#include "tune/candidate.hpp"

namespace ppctl::tune {

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
  int64_t top = 5;            ///< configurations listed
};

/// One configuration simulated.
struct Evaluated {
  Knobs knobs;
  std::vector<Change> changes;  ///< the spec lines that select it (memory lever included)
  double lower_bound = 0.0;     ///< lower_bound() of its program and costs
  double step = 0.0;            ///< Simulation::step_time, TuneOptions::unit
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
  double step = 0.0;
  double bubble = 0.0;
  int64_t peak_bytes = 0;
  bool fits = true;     ///< within TuneOptions::memory_gib
  int64_t rank = 0;     ///< 1 + the candidates ranked with a strictly smaller step
};

/// What the search found.
struct TuneResult {
  std::vector<Evaluated> top;   ///< the fastest that fit, at most TuneOptions::top, by (step, peak, order)
  int64_t candidates = 0;       ///< configurations enumerated (zb-auto ones included)
  int64_t simulated = 0;        ///< simulated and estimated
  int64_t ranked = 0;           ///< of those, the ones that fit
  std::vector<std::pair<std::string, int64_t>> ruled_out;  ///< reason and count, most first (then by reason)
  OwnConfiguration own;
};

/// A lower bound of simulate(program, costs).step_time: max over ranks of the forwards that must run on
/// earlier stages before the rank's first stage can start (sum of F of the stages before it), plus the
/// rank's own compute (m x (F + min(B, I + W)) over its stages), plus the chain of actions that must follow
/// its last compute action (after a B or I of stage s, min(B, I) of every stage below s; after an F, the
/// later stages' F and every stage's min(B, I); after a W, nothing). For 1F1B with equal costs this is its
/// step, (m + p - 1)(F + B). Transfers, deferred-W penalties and idle time only add to the real step.
double lower_bound(const schedule::Program& program, const schedule::CostModel& costs);

/// Every divisor of `n` (>= 1), ascending.
std::vector<int64_t> divisors(int64_t n);

/// `times` with every forward and backward multiplied by `factor` (a micro batch size against the one they
/// were measured at: the tuner takes a microbatch's time as proportional to its sequences).
plan::LayerTimes scaled(const plan::LayerTimes& times, double factor);

/// The times per microbatch a candidate of micro batch size `mbs` is costed with: times_at(affine) with two
/// probes, else `times` scaled by mbs / `spec_mbs` (the spec's micro_batch_size; proportional model).
plan::LayerTimes candidate_times(const TuneOptions& options, int64_t mbs, int64_t spec_mbs);

/// The search (docs: README `ppctl plan --tune`). Candidates: schedules gpipe, 1f1b, interleaved-1f1b with
/// v 2, 3, 4, zb-h1, zbv, and zb-auto; every m dividing the global batch per replica (m x micro_batch_size of
/// `spec`) with micro_batch_size = that batch / m (with two probes, only sizes affine.hpp's searched() takes;
/// the others counted as ruled out); the uniform split, balance auto's, and with measured times
/// schedule::balance_by_times's; train.recompute none, full, blocks (recompute_every as the spec's). Each is
/// the spec's YAML with its lines applied, validated by config::parse_job_spec and schedule::job_program
/// (refused ones counted by rule), laid out by schedule::job_layout and costed by schedule::job_cost_model
/// on candidate_times at its micro batch size. Ordered by lower_bound, candidates are simulated and estimated
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
