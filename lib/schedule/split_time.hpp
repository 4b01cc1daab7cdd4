// Simulated step time of a split of the blocks over the stages, and the job's layout chosen with it
// (pipeline.balance auto confirms its split by simulating the job's program; `ppctl plan --layer-costs`
// chooses one from measured per-layer times). No torch.
#pragma once

#include <vector>

#include "config/job_spec.hpp"
#include "plan/balance.hpp"
#include "plan/layer_times.hpp"
#include "plan/layout.hpp"
#include "plan/tp_collectives.hpp"
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

/// Adds each stage's tensor-parallel collectives (plan::stage_tp_collectives, counted in all-reduces of a
/// microbatch's activations: TpCollectives::all_reduce_equivalents) to its F, B and I at `all_reduce_cost` each,
/// in `model`'s unit: one entry for every stage, or one per stage. A single StageCosts entry shared by every stage
/// becomes one per stage. W is unchanged (it issues none). Nothing changes at tp 1.
void add_tp_collectives(CostModel& model, const config::JobSpec& spec, const plan::Layout& layout,
                        const std::vector<double>& all_reduce_cost);

/// Where `ppctl plan`'s stage costs come from, which decides how add_plan_tp_collectives times a collective.
enum class PlanCosts {
  Default,   ///< the simulator's F = 1, B = 2, I = W = 1 per stage: each stage's F is its forward
  Measured,  ///< --costs, --layer-costs or pipeline.zb_auto's: ms, taken as measured at the spec's tp
};

/// `ppctl plan`'s tensor-parallel term (docs/planning.md, "Tensor-parallel collectives"), added to `model` by
/// add_tp_collectives and described in model.tp_collectives; nothing at tp 1. One all-reduce takes
/// plan::tp_all_reduce_ms. Default costs: in units of each stage's F, its forward's FLOPs
/// (plan::flop_layer_costs) at options.tflops (plan::forward_ms). Measured costs: ms when
/// options.collective_ms is given; else not added, the measured times holding the spec's collectives already.
void add_plan_tp_collectives(CostModel& model, const config::JobSpec& spec, const plan::Layout& layout,
                             const plan::TpCommOptions& options, PlanCosts source);

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
