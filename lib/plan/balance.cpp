// pipeline.balance auto: FLOP costs per layer and the min-max split of the blocks over the stages.
#include "plan/balance.hpp"

#include <fmt/format.h>

#include <queue>
#include <utility>

#include "core/check.hpp"
#include "plan/layer_times.hpp"

namespace ppctl::plan {

double block_forward_flops(const config::ModelSpec& model) {
  const double s = static_cast<double>(model.seq_len);
  const double h = static_cast<double>(model.hidden);
  const double f = static_cast<double>(config::ffn_hidden_of(model));
  const double d = static_cast<double>(config::head_dim_of(model));
  const double q = static_cast<double>(model.heads) * d;  // query (and attention output) width
  const double kv = static_cast<double>(config::kv_heads_of(model)) * d;
  const double mlp_matrices = config::llama_family(model.arch) ? 3.0 : 2.0;
  return 2.0 * h * (2.0 * q + 2.0 * kv) + 4.0 * s * q + mlp_matrices * 2.0 * h * f;
}

double lm_head_forward_flops(const config::ModelSpec& model) {
  return 2.0 * static_cast<double>(model.hidden) * static_cast<double>(model.vocab_size);
}

LayerCosts flop_layer_costs(const config::ModelSpec& model) {
  const double h = static_cast<double>(model.hidden);
  const double v = static_cast<double>(model.vocab_size);
  return {block_forward_flops(model), model.arch == config::Arch::Gpt2 ? 2.0 * h : h,
          lm_head_forward_flops(model) + 2.0 * h + 5.0 * v};
}

std::vector<double> stage_costs(const std::vector<LayerRange>& split, const LayerCosts& costs) {
  std::vector<double> out;
  for (size_t s = 0; s < split.size(); ++s) {
    out.push_back(static_cast<double>(split[s].size()) * costs.block + (s == 0 ? costs.embedding : 0.0) +
                  (s + 1 == split.size() ? costs.head : 0.0));
  }
  return out;
}

std::vector<LayerRange> split_from_counts(const std::vector<int64_t>& counts) {
  std::vector<LayerRange> split;
  int64_t begin = 0;
  for (const int64_t n : counts) {
    split.push_back({begin, begin + n});
    begin += n;
  }
  return split;
}

std::vector<LayerRange> partition_min_max(int64_t layers, int64_t stages, const LayerCosts& costs, TieBreak tie) {
  partition_uniform(layers, stages);  // the same checks and messages (stages >= 1, layers >= stages)
  PPCTL_CHECK(costs.block > 0, PlanError, fmt::format("a block's cost must be positive, not {}", costs.block),
              "give every block a cost above 0");
  // Heap of (cost of the stage with one more block, stage key); the key orders ties: the lower stage
  // first for FirstStage, the higher for LastStage.
  const auto key = [&](int64_t s) { return tie == TieBreak::FirstStage ? s : stages - 1 - s; };
  using Item = std::pair<double, int64_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> next;
  std::vector<int64_t> counts(static_cast<size_t>(stages), 1);
  const std::vector<double> base = stage_costs(split_from_counts(counts), costs);
  for (int64_t s = 0; s < stages; ++s) next.push({base[static_cast<size_t>(s)] + costs.block, key(s)});
  for (int64_t left = layers - stages; left > 0; --left) {
    const auto [cost, k] = next.top();
    next.pop();
    const int64_t s = tie == TieBreak::FirstStage ? k : stages - 1 - k;
    ++counts[static_cast<size_t>(s)];
    next.push({cost + costs.block, k});
  }
  return split_from_counts(counts);
}

std::vector<LayerRange> balance_layers(int64_t layers, int64_t stages, const LayerCosts& costs,
                                       const StepTimeOf* step_time) {
  auto first = partition_min_max(layers, stages, costs, TieBreak::FirstStage);
  if (step_time == nullptr) return first;
  return fastest_split({partition_uniform(layers, stages), std::move(first),
                        partition_min_max(layers, stages, costs, TieBreak::LastStage)},
                       *step_time);
}

}  // namespace ppctl::plan
