// The one Program a job runs, whichever way it is specified (generated or a custom CSV): what
// `ppctl plan` prints, what every worker executes and what `ppctl verify` checks.
#pragma once

#include "config/job_spec.hpp"
#include "schedule/action.hpp"

namespace ppctl::schedule {

/// Builds the spec's program: generate(schedule_params(spec)) for generated kinds, or
/// read_csv(pipeline.schedule_file) for custom ones (whose ranks must equal pipeline.stages and whose
/// stage count must equal stages x virtual_stages); then adds communication and validates.
/// Throws ppctl::ScheduleError (rule broken, and the rank x action grid where it applies).
Program job_program(const config::JobSpec& spec);

}  // namespace ppctl::schedule
