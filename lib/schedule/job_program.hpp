// The one Program a job runs, whichever way it is specified (generated or a custom CSV): what
// `ppctl plan` prints, what every worker executes and what `ppctl verify` checks.
#pragma once

#include <string>

#include "config/job_spec.hpp"
#include "schedule/action.hpp"

namespace ppctl::schedule {

/// Builds the spec's program: generate(schedule_params(spec)) for generated kinds, or the CSV of
/// pipeline.schedule_file for custom ones (whose ranks must equal pipeline.stages and whose stage count
/// must equal stages x virtual_stages); then adds communication, with runtime.overlap_grad_reduce one
/// REDUCE_GRAD per stage (add_gradient_reduction; without it the executor reduces every stage after
/// the schedule), and validates. `schedule_text`, when given, is the CSV's contents (workers get the
/// text the launcher read, not the file).
/// Throws ppctl::ScheduleError (rule broken, and the rank x action grid where it applies).
Program job_program(const config::JobSpec& spec, const std::string* schedule_text = nullptr);

}  // namespace ppctl::schedule
