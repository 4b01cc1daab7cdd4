// Simulated step time of a split, from per-layer costs or times, and the splits chosen with them.
#include "schedule/split_time.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ppctl::schedule {

CostModel stage_cost_model(const std::vector<plan::LayerRange>& split, const plan::LayerTimes& times,
                           double p2p_latency, double grad_reduce) {
  CostModel model;
  model.stages.clear();
  for (const auto& t : plan::stage_times(split, times)) {
    model.stages.push_back({t.forward_ms, t.backward_ms, t.backward_ms / 2, t.backward_ms / 2});
  }
  model.p2p_latency = p2p_latency;
  model.grad_reduce = grad_reduce;
  return model;
}

CostModel layout_cost_model(const plan::Layout& layout, const plan::LayerTimes& times, double p2p_latency,
                            double grad_reduce) {
  std::vector<plan::LayerRange> split;
  for (const auto& stage : layout.stages) split.push_back(stage.layers);
  return stage_cost_model(split, times, p2p_latency, grad_reduce);
}

CostModel job_cost_model(const config::JobSpec& spec, const plan::Layout& layout, const plan::LayerTimes& times,
                         double p2p_latency, double grad_reduce) {
  auto model = layout_cost_model(layout, times, p2p_latency, grad_reduce);
  if (spec.train.recompute == config::Recompute::None) return model;
  for (auto& stage : model.stages) {
    stage.backward += stage.forward;
    stage.input_grad += stage.forward;
  }
  return model;
}

void add_tp_collectives(CostModel& model, const config::JobSpec& spec, const plan::Layout& layout,
                        const std::vector<double>& all_reduce_cost) {
  if (spec.pipeline.tensor_parallel <= 1 || all_reduce_cost.empty()) return;
  const auto stages = static_cast<size_t>(layout.stages.size());
  if (model.stages.size() == 1 && stages > 1) model.stages.assign(stages, model.stages.front());
  const double activation = plan::tp_activation_bytes(spec);
  for (size_t s = 0; s < stages && s < model.stages.size(); ++s) {
    const double cost = all_reduce_cost.size() == 1 ? all_reduce_cost.front() : all_reduce_cost.at(s);
    const auto counted = plan::stage_tp_collectives(spec, layout.stages[s]);
    auto& stage = model.stages[s];
    stage.forward += cost * counted.forward.all_reduce_equivalents(activation);
    stage.backward += cost * counted.backward.all_reduce_equivalents(activation);
    stage.input_grad += cost * counted.input_grad.all_reduce_equivalents(activation);
  }
}

void add_plan_tp_collectives(CostModel& model, const config::JobSpec& spec, const plan::Layout& layout,
                             const plan::TpCommOptions& options, PlanCosts source) {
  if (spec.pipeline.tensor_parallel <= 1) return;
  const double all_reduce_ms = plan::tp_all_reduce_ms(spec, options);
  const double activation = plan::tp_activation_bytes(spec);
  std::vector<double> cost;  // one all-reduce in the costs' unit, per stage
  std::string added;
  if (source == PlanCosts::Measured) {
    if (options.collective_ms) {
      cost.push_back(all_reduce_ms);
      added = "added to each stage's F, B and I by its count (ms)";
    } else {
      added = "not added: measured costs hold the spec's collectives (--tp-collective-ms MS adds them)";
    }
  } else {
    const auto flop = plan::flop_layer_costs(spec.model);
    std::vector<plan::LayerRange> split;
    for (const auto& stage : layout.stages) split.push_back(stage.layers);
    std::vector<double> shares;
    for (const double flops : plan::stage_costs(split, flop)) {
      cost.push_back(all_reduce_ms / plan::forward_ms(spec, flops, options));
      shares.push_back(cost.back() * plan::stage_tp_collectives(spec, layout.stages[shares.size()])
                                         .forward.all_reduce_equivalents(activation));
    }
    added = fmt::format("added to each stage's F, B and I by its count, in units of its forward (F = 1: its FLOPs at "
                        "{:g} TFLOP/s, --tflops): F +{:.3g} to +{:.3g}",
                        options.tflops, *std::min_element(shares.begin(), shares.end()),
                        *std::max_element(shares.begin(), shares.end()));
  }
  add_tp_collectives(model, spec, layout, cost);
  model.tp_collectives = fmt::format("{}; {}", plan::describe_tp_collectives(spec, options), added);
}

CostModel split_cost_model(const std::vector<plan::LayerRange>& split, const plan::LayerCosts& costs) {
  return stage_cost_model(split, plan::layer_times(costs, split.empty() ? 0 : split.back().end));
}

plan::StepTimeOf split_step_time(const Program& program, const plan::LayerTimes& times) {
  return [&program, times](const std::vector<plan::LayerRange>& split) {
    return simulate(program, stage_cost_model(split, times)).step_time;
  };
}

plan::StepTimeOf split_step_time(const Program& program, const plan::LayerCosts& costs) {
  return [&program, costs](const std::vector<plan::LayerRange>& split) {
    return simulate(program, split_cost_model(split, costs)).step_time;
  };
}

plan::Layout job_layout(const config::JobSpec& spec, const Program& program) {
  const auto step_time = split_step_time(program, plan::flop_layer_costs(spec.model));
  return plan::make_layout(spec, &program.stage_to_rank, &step_time);
}

std::vector<plan::LayerRange> balance_by_times(const config::JobSpec& spec, const Program& program,
                                               const plan::LayerTimes& times) {
  const int64_t layers = spec.model.layers;
  const int64_t stages = program.num_stages;
  const auto flop_time = split_step_time(program, plan::flop_layer_costs(spec.model));
  return plan::fastest_split(
      {plan::partition_uniform(layers, stages), plan::balance_layers(layers, stages, plan::flop_layer_costs(spec.model), &flop_time),
       plan::partition_min_max(times, stages, plan::TieBreak::FirstStage),
       plan::partition_min_max(times, stages, plan::TieBreak::LastStage)},
      split_step_time(program, times));
}

plan::Layout layout_of_split(const config::JobSpec& spec, const Program& program,
                             const std::vector<plan::LayerRange>& split) {
  config::JobSpec with_split = spec;
  with_split.pipeline.balance = "uniform";
  with_split.pipeline.layers_per_stage.clear();
  for (const auto& range : split) with_split.pipeline.layers_per_stage.push_back(range.size());
  return plan::make_layout(with_split, &program.stage_to_rank);
}

}  // namespace ppctl::schedule
