// The text `ppctl plan` prints (and `ppctl train` prints at start): layout table, bubble, actions.
#pragma once

#include <string>

#include "config/job_spec.hpp"
#include "plan/layout.hpp"
#include "schedule/action.hpp"

namespace ppctl::schedule {

/// Human-readable plan: model size, batch geometry, the rank -> stage -> block-range table with
/// parameters per stage and warmup forwards per rank, the bubble fraction (p-1)/(m+p-1), and each
/// rank's action order (compute only, or with communication when `with_communication`).
std::string format_plan(const config::JobSpec& spec, const plan::Layout& layout,
                        const Program& program, bool with_communication);

}  // namespace ppctl::schedule
