// The text `ppctl plan` prints (and `ppctl train` prints at start): layout table, bubble, simulated
// step, actions per rank.
#pragma once

#include <string>

#include "config/job_spec.hpp"
#include "plan/layout.hpp"
#include "schedule/action.hpp"
#include "schedule/layer_costs.hpp"
#include "schedule/simulate.hpp"

namespace ppctl::schedule {

/// Human-readable plan: model size, batch geometry, the rank -> stage -> block-range table with
/// parameters per stage and forwards before each rank's first backward, the closed-form bubble
/// (p-1)/(v m+p-1), the simulated step (time, bubble, peak activations per rank) for `costs`, and each
/// rank's action order (compute only, or with communication when `with_communication`). The split
/// section compares the uniform split, balance auto's, the spec's layers_per_stage and, with
/// `layer_costs` (`ppctl plan --layer-costs`), the split balancing them, each simulated and with its
/// memory per rank, under `layer_costs` when given (ms) or else the FLOP costs (block forwards).
std::string format_plan(const config::JobSpec& spec, const plan::Layout& layout,
                        const Program& program, const Simulation& simulation, const CostModel& costs,
                        bool with_communication, const GivenLayerCosts* layer_costs = nullptr);

}  // namespace ppctl::schedule
