// Simulated step time of a split of the blocks over the stages, and the job's layout chosen with it
// (pipeline.balance auto confirms its split by simulating the job's program). No torch.
#pragma once

#include <vector>

#include "config/job_spec.hpp"
#include "plan/balance.hpp"
#include "plan/layout.hpp"
#include "schedule/action.hpp"
#include "schedule/simulate.hpp"

namespace ppctl::schedule {

/// Per-stage costs of `split` in units of one block's forward (costs.block = 1 ms): F = the stage's
/// plan::stage_costs / costs.block, B = 2F, I = W = F (the simulator's default F:B:I:W = 1:2:1:1).
CostModel split_cost_model(const std::vector<plan::LayerRange>& split, const plan::LayerCosts& costs);

/// simulate(program, split_cost_model(split, costs)).step_time, for any split with program.num_stages
/// ranges. `program` must outlive the returned function.
plan::StepTimeOf split_step_time(const Program& program, const plan::LayerCosts& costs);

/// plan::make_layout(spec, &program.stage_to_rank) with balance auto confirmed by simulating `program`
/// under plan::flop_layer_costs: what `ppctl plan`, `train` and every worker lay out. Throws as make_layout.
plan::Layout job_layout(const config::JobSpec& spec, const Program& program);

}  // namespace ppctl::schedule
