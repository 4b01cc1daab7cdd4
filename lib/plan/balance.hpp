// pipeline.balance auto: per-layer costs of the model (FLOP counts) and the split of its blocks over
// stages that minimises the slowest stage, confirmed by a step-time evaluator. No torch, no schedule/.
#pragma once

#include <cstdint>
#include <vector>

#include "config/job_spec.hpp"
#include "plan/layout.hpp"

namespace ppctl::plan {

/// Forward cost of each piece of the model, in FLOPs per token (any unit works as long as all three
/// share it: the split depends only on their ratios).
struct LayerCosts {
  double block = 1.0;      ///< one transformer block (every block costs the same)
  double embedding = 0.0;  ///< the embedding, added on the first stage
  double head = 0.0;       ///< final norm, LM head and loss, added on the last stage
};

/// Forward FLOPs per token of one block (multiply-add = 2 FLOPs), kv = kv_heads x head_dim,
/// f = ffn_hidden_of, s = seq_len: 2h(2h + 2kv) for q, k, v and the output projection, 4 s h for the
/// attention scores and the weighted values (causal masking not subtracted), and 2 h f x 2 (gpt2) or x 3
/// (llama's SwiGLU) for the MLP. With kv = h and f = 4h: 24 h^2 + 4 s h, the per-layer term of Narayanan
/// et al., arXiv 2104.04473 §5.1 (their 96 B s l h^2 (1 + s/6h + V/16lh) is 3 x forward x 4/3 recompute).
double block_forward_flops(const config::ModelSpec& model);

/// Forward FLOPs per token of the LM head, 2 h V (the same source), without the loss.
double lm_head_forward_flops(const config::ModelSpec& model);

/// The costs balance: auto uses: block_forward_flops; embedding h per token (gpt2 2h: token and position
/// rows gathered and added; a gather does no multiply); head = lm_head_forward_flops + 2 h (final norm) +
/// 5 V (log-softmax and the picked log-probability: max, subtract, exp, sum, log, about one FLOP each per
/// logit). Backward is taken as twice the forward for all three (schedule's default ratio F:B = 1:2).
LayerCosts flop_layer_costs(const config::ModelSpec& model);

/// Cost of each stage of `split`: its blocks x costs.block, plus costs.embedding on stage 0 and
/// costs.head on the last stage.
std::vector<double> stage_costs(const std::vector<LayerRange>& split, const LayerCosts& costs);

/// Contiguous ranges from block counts (counts[s] blocks on stage s, in order from block 0).
std::vector<LayerRange> split_from_counts(const std::vector<int64_t>& counts);

/// Which stage gets a block when several would end equally cheap.
enum class TieBreak { FirstStage, LastStage };

/// The split of `layers` identical blocks over `stages` contiguous stages (each >= 1 block) whose most
/// expensive stage (stage_costs) is as cheap as possible. Exact: every stage first gets one block; each
/// remaining block then goes to the stage that would be cheapest with it (ties by `tie`). With identical
/// blocks a stage's cost after its n-th block is e_s + n b, so the split's maximum is at least the
/// (layers - stages)-th smallest of these values over the blocks beyond the first, which the greedy
/// reaches: list scheduling of unit jobs on machines with ready times e_s + b (Graham, "Bounds on
/// multiprocessing timing anomalies", SIAM J. Appl. Math. 1969, is optimal for equal jobs). Megatron-Core
/// approximates the same with account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split
/// (the embedding and the loss each counted as one block). O(layers log stages).
/// Throws ppctl::PlanError when stages < 1 or layers < stages, or costs.block <= 0.
std::vector<LayerRange> partition_min_max(int64_t layers, int64_t stages, const LayerCosts& costs,
                                          TieBreak tie = TieBreak::FirstStage);

/// pipeline.balance auto (StepTimeOf: layout.hpp): among the uniform split and partition_min_max's splits (ties to the first and to
/// the last stage), the one with the least `step_time`; the uniform split unless another is strictly
/// faster (the first listed wins a tie). Without `step_time`, partition_min_max(FirstStage).
/// Throws as partition_min_max.
std::vector<LayerRange> balance_layers(int64_t layers, int64_t stages, const LayerCosts& costs,
                                       const StepTimeOf* step_time = nullptr);

}  // namespace ppctl::plan
