// Simulated step time of a split, from per-layer costs.
#include "schedule/split_time.hpp"

namespace ppctl::schedule {

CostModel split_cost_model(const std::vector<plan::LayerRange>& split, const plan::LayerCosts& costs) {
  CostModel model;
  model.stages.clear();
  for (const double c : plan::stage_costs(split, costs)) {
    const double f = c / costs.block;
    model.stages.push_back({f, 2.0 * f, f, f});
  }
  return model;
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

}  // namespace ppctl::schedule
