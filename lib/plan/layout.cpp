// Stage layout: uniform or chosen layer partition, parameter counts per stage, bubble estimate. No torch.
#include "plan/layout.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"
#include "plan/balance.hpp"
#include "plan/tensor_parallel.hpp"

namespace ppctl::plan {

/// Contiguous blocks, sizes floor(L/p) or floor(L/p)+1, the larger ones first (Megatron-LM's
/// uniform split; arXiv 2104.04473 §2.2 assumes equal layers per stage).
std::vector<LayerRange> partition_uniform(int64_t layers, int64_t stages) {
  PPCTL_CHECK(
      stages >= 1, PlanError,
      fmt::format("cannot split {} layers into {} stages: a pipeline needs at least 1 stage",
                  layers, stages),
      "use 1 or more stages");
  PPCTL_CHECK(layers >= stages, PlanError,
              fmt::format("cannot split {} layers into {} stages: every stage needs at least one "
                          "layer (layers >= stages)",
                          layers, stages),
              fmt::format("use at most {} stages, or at least {} layers", layers, stages));
  std::vector<LayerRange> ranges;
  ranges.reserve(static_cast<size_t>(stages));
  const int64_t base = layers / stages;
  const int64_t extra = layers % stages;
  int64_t begin = 0;
  for (int64_t s = 0; s < stages; ++s) {
    const int64_t size = base + (s < extra ? 1 : 0);
    ranges.push_back({begin, begin + size});
    begin += size;
  }
  return ranges;
}

// The whole counts (one unsplit rank); the terms and how tensor parallelism divides them are in tensor_parallel.cpp.
int64_t block_parameters(const config::ModelSpec& model) { return block_parameter_split(model).whole(); }

int64_t embedding_parameters(const config::ModelSpec& model) { return embedding_parameter_split(model).whole(); }

int64_t head_parameters(const config::ModelSpec& model) { return head_parameter_split(model).whole(); }

/// The idle share of a step's time when every F and B costs the same on every stage: (p-1)/(m+p-1)
/// (GPipe, arXiv 1811.06965 §2.3). Megatron-LM (arXiv 2104.04473 §2.2.1) states the same bubble as
/// (p-1)/m of the ideal time, and shows 1F1B has the same bubble as GPipe.
double bubble_fraction(int64_t stages, int64_t microbatches) {
  PPCTL_CHECK(stages >= 1 && microbatches >= 1, PlanError,
              fmt::format("bubble fraction of {} stages and {} microbatches: both must be >= 1",
                          stages, microbatches),
              "set pipeline.stages >= 1 and pipeline.microbatches >= 1");
  return static_cast<double>(stages - 1) / static_cast<double>(microbatches + stages - 1);
}

std::vector<int64_t> place_stages(int64_t ranks, int64_t virtual_stages, Placement placement) {
  if (ranks < 1 || virtual_stages < 1) {
    throw PlanError(fmt::format("cannot place {} virtual stage(s) on {} rank(s): both must be >= 1",
                                virtual_stages, ranks));
  }
  if (placement == Placement::V && virtual_stages != 2) {
    throw PlanError(fmt::format("the V placement needs exactly 2 stages per rank, not {} (fix: set "
                                "pipeline.virtual_stages: 2)",
                                virtual_stages));
  }
  std::vector<int64_t> stage_to_rank(static_cast<size_t>(ranks * virtual_stages));
  for (int64_t k = 0; k < ranks * virtual_stages; ++k) {
    stage_to_rank[static_cast<size_t>(k)] =
        (placement == Placement::V && k >= ranks) ? 2 * ranks - 1 - k : k % ranks;
  }
  return stage_to_rank;
}

Placement default_placement(config::ScheduleKind kind) {
  return kind == config::ScheduleKind::ZBV ? Placement::V : Placement::Loop;
}

std::vector<LayerRange> spec_split(const config::JobSpec& spec, const StepTimeOf* step_time) {
  const int64_t num_stages = spec.pipeline.stages * spec.pipeline.virtual_stages;
  const auto& counts = spec.pipeline.layers_per_stage;
  if (counts.empty()) {
    return spec.pipeline.balance == "auto"
               ? balance_layers(spec.model.layers, num_stages, flop_layer_costs(spec.model), step_time)
               : partition_uniform(spec.model.layers, num_stages);
  }
  int64_t sum = 0;
  for (const int64_t n : counts) {
    PPCTL_CHECK(n >= 1, PlanError, fmt::format("pipeline.layers_per_stage holds {}", n),
                "give every stage at least one block");
    sum += n;
  }
  PPCTL_CHECK(static_cast<int64_t>(counts.size()) == num_stages && sum == spec.model.layers, PlanError,
              fmt::format("pipeline.layers_per_stage has {} entries summing to {}, but the model has {} stages "
                          "and {} blocks",
                          counts.size(), sum, num_stages, spec.model.layers),
              "give one block count per stage, adding up to model.layers");
  return split_from_counts(counts);
}

Layout make_layout(const config::JobSpec& spec, const std::vector<int64_t>* stage_to_rank,
                   const StepTimeOf* step_time) {
  const int64_t p = spec.pipeline.stages;
  const int64_t v = spec.pipeline.virtual_stages;
  const int64_t m = spec.pipeline.microbatches;
  const int64_t num_stages = p * v;
  const std::string source = spec.source.empty() ? "job spec" : spec.source;
  std::vector<LayerRange> ranges;
  try {
    ranges = spec_split(spec, step_time);
  } catch (const PlanError& e) {
    throw PlanError(fmt::format("{}: model.layers = {}, pipeline.stages = {} x pipeline.virtual_stages "
                                "= {}: {}",
                                source, spec.model.layers, p, v, e.what()));
  }
  Layout layout;
  layout.pipeline_size = p;
  layout.data_parallel = std::max<int64_t>(spec.pipeline.data_parallel, 1);
  layout.tensor_parallel = spec.pipeline.tensor_parallel;
  layout.world_size = layout.tensor_parallel * layout.data_parallel * p;
  layout.num_stages = num_stages;
  layout.num_microbatches = m;
  layout.bubble_fraction = static_cast<double>(p - 1) / static_cast<double>(v * m + p - 1);
  layout.stage_to_rank = stage_to_rank ? *stage_to_rank
                                       : place_stages(p, v, default_placement(spec.pipeline.schedule));
  if (static_cast<int64_t>(layout.stage_to_rank.size()) != num_stages) {
    throw PlanError(fmt::format("{}: the schedule places {} stages, but pipeline.stages x "
                                "pipeline.virtual_stages = {} x {} = {}",
                                source, layout.stage_to_rank.size(), p, v, num_stages));
  }
  for (int64_t s = 0; s < num_stages; ++s) {
    StageLayout stage;
    stage.stage = s;
    stage.rank = layout.stage_to_rank[static_cast<size_t>(s)];
    if (stage.rank < 0 || stage.rank >= p) {
      throw PlanError(fmt::format("{}: stage {} is placed on rank {}, outside [0, {})", source, s,
                                  stage.rank, p));
    }
    stage.layers = ranges[static_cast<size_t>(s)];
    stage.has_embedding = s == 0;
    stage.has_head = s == num_stages - 1;
    // The whole stage (every tp rank's share together): tensor_parallel 1.
    const auto counts = stage_parameters(spec.model, stage.layers.size(), stage.has_embedding, stage.has_head, 1);
    stage.parameters = counts.parameters;
    stage.tied_copy = counts.tied_copy;
    layout.total_parameters += stage.parameters - stage.tied_copy;
    layout.stages.push_back(stage);
  }
  return layout;
}

}  // namespace ppctl::plan
