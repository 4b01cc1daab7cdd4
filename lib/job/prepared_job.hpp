// A job checked and planned before anything starts: spec, program, layout, and what workers receive.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "plan/layout.hpp"
#include "schedule/action.hpp"
#include "schedule/layer_costs.hpp"

namespace ppctl::job {

/// Everything `plan` shows and `train` / `verify` run.
struct PreparedJob {
  config::JobSpec spec;
  schedule::Program program;
  plan::Layout layout;
  /// The exact spec text read and validated here (at most config::kMaxSpecBytes), and a custom schedule's
  /// CSV text: workers run these texts (job/worker_handover.hpp), so editing files after launch cannot
  /// change what runs.
  std::string spec_text;
  std::optional<std::string> schedule_text;
};

/// Reads the spec file once (and a custom schedule's CSV), validates the spec, builds and validates the
/// program and lays out the stages. Throws ppctl::ConfigError (every spec problem), ppctl::PlanError or
/// ppctl::ScheduleError; nothing is started or written. `overrides` (command-line values such as `--steps N`)
/// replace their spec fields before validation (config::SpecOverrides), so `spec` holds the effective values.
PreparedJob prepare_job(const std::string& spec_path, const config::SpecOverrides& overrides = {});

/// `SPEC:LINE` where the job's spec text writes `field` (a dotted path), else `SPEC` (config::field_location):
/// the start of a message about a field checked after prepare_job (e.g. checkpoint.dir).
std::string spec_field_location(const PreparedJob& job, const std::string& field);

/// `ppctl plan --balance`: the job as if its spec said pipeline.balance: auto without
/// pipeline.layers_per_stage, its layout chosen again. For showing only: workers read the spec as written.
void use_balance_auto(PreparedJob& job);

/// `ppctl plan --layer-costs SOURCE`: the per-layer times SOURCE gives (a costs file or a previous run's
/// run directory: schedule::given_layer_costs); with `balance` (`--balance`) the job is laid out again with
/// the split that balances them (schedule::balance_by_times). For showing only: workers read the spec as
/// written. Throws ppctl::PlanError as given_layer_costs.
schedule::GivenLayerCosts use_layer_costs(PreparedJob& job, const std::string& source, bool balance);

/// "spec H": H is the FNV-1a 64 hash (core::fnv1a64) of what the workers run (spec text, program hash,
/// custom schedule text), in hex. Ranks that read the same spec compute the same
/// value; external launches append it to the job identity (comm::RendezvousInfo::job_id).
std::string job_fingerprint(const PreparedJob& job);

}  // namespace ppctl::job
