// Simulated step time of a split of the blocks over the stages, and the job's layout chosen with it
// (pipeline.balance auto confirms its split by simulating the job's program; `ppctl plan --layer-costs`
// chooses one from measured per-layer times). No torch.
#pragma once

#include <vector>

#include "config/job_spec.hpp"
#include "plan/balance.hpp"
#include "plan/layer_times.hpp"
#include "plan/layout.hpp"
#include "schedule/action.hpp"
#include "schedule/simulate.hpp"

namespace ppctl::schedule {

/// Per-stage costs of `split` under per-layer `times` (plan::stage_times): F and B as summed, a split
/// backward's I = W = B / 2; `p2p_latency` ms per transfer, `grad_reduce` ms per stage's gradient
/// reduction (CostModel::grad_reduce).
CostModel stage_cost_model(const std::vector<plan::LayerRange>& split, const plan::LayerTimes& times,
                           double p2p_latency = 0.0, double grad_reduce = 0.0);

/// stage_cost_model of the split `layout` holds.
CostModel layout_cost_model(const plan::Layout& layout, const plan::LayerTimes& times, double p2p_latency = 0.0,
                            double grad_reduce = 0.0);

/// layout_cost_model(layout, times, ...) with train.recompute's extra work: under full or blocks the
/// backward first runs the stage's forward again (runtime/executor.hpp), so B and I each gain the stage's
/// F (W is unchanged). `times` are taken as measured without recomputation. What `ppctl plan
/// --layer-costs` and `ppctl plan --tune` simulate with.
CostModel job_cost_model(const config::JobSpec& spec, const plan::Layout& layout, const plan::LayerTimes& times,
                         double p2p_latency = 0.0, double grad_reduce = 0.0);

/// Per-stage costs of `split` in units of one block's forward (costs.block = 1 ms): F = the stage's
/// plan::stage_costs / costs.block, B = 2F, I = W = F (the simulator's default F:B:I:W = 1:2:1:1).
CostModel split_cost_model(const std::vector<plan::LayerRange>& split, const plan::LayerCosts& costs);

/// simulate(program, stage_cost_model(split, times)).step_time, for any split with program.num_stages
/// ranges. `program` must outlive the returned function.
plan::StepTimeOf split_step_time(const Program& program, const plan::LayerTimes& times);

/// simulate(program, split_cost_model(split, costs)).step_time, for any split with program.num_stages
/// ranges. `program` must outlive the returned function.
plan::StepTimeOf split_step_time(const Program& program, const plan::LayerCosts& costs);

/// plan::make_layout(spec, &program.stage_to_rank) with balance auto confirmed by simulating `program`
/// under plan::flop_layer_costs: what `ppctl plan`, `train` and every worker lay out. Throws as make_layout.
plan::Layout job_layout(const config::JobSpec& spec, const Program& program);

/// The split balancing `times`: of the uniform split, balance auto's FLOP split and plan::partition_min_max
/// of `times` (both tie-breaks), the one `program` simulates fastest under `times` (the first listed on
/// a tie). Throws as plan::partition_min_max.
std::vector<plan::LayerRange> balance_by_times(const config::JobSpec& spec, const Program& program,
                                               const plan::LayerTimes& times);

/// `split` as the job's layout: plan::make_layout with pipeline.layers_per_stage set to its block counts.
/// Throws as make_layout.
plan::Layout layout_of_split(const config::JobSpec& spec, const Program& program,
                             const std::vector<plan::LayerRange>& split);

}  // namespace ppctl::schedule
