// What `ppctl plan --tune` prints: the search's inputs, the top configurations with their spec lines, the
// spec's own configuration's rank, and what was ruled out and why. No torch.
#pragma once

#include <string>

#include "config/job_spec.hpp"
#include "tune/search.hpp"

namespace ppctl::tune {

/// The tuner's report for `spec` (several lines, each ending in '\n'): the costs and memory limit used and
/// what was searched (with the levers kept as the spec writes them); the calibration on probe runs (its fit,
/// each probe's measured and simulated step; or that there was none); the top configurations, each with its
/// simulated step (options.unit, 2 decimals, as `ppctl plan` prints it), its predicted step when calibrated, mean bubble, largest memory per
/// pipeline rank and the YAML lines that select it (yaml_lines); the spec's own configuration's step and
/// rank; the counts of candidates simulated and ruled out, by reason. With nothing that fits it says so
/// (the caller exits 4).
std::string format_tune(const TuneResult& result, const config::JobSpec& spec, const TuneOptions& options);

}  // namespace ppctl::tune
