// Stage layout: which layers each stage holds, which rank runs it, its parameter count, the bubble.
// Pure functions of the job spec; no torch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "config/job_spec.hpp"
#include "plan/rank_grid.hpp"

namespace ppctl::plan {

/// Half-open range [begin, end) of global transformer-block indices.
struct LayerRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

/// Simulated step time of a split of the blocks over the stages (ms or any unit); supplied by the caller
/// (schedule/ simulates the job's program), so that plan/ does not depend on schedule/.
using StepTimeOf = std::function<double(const std::vector<LayerRange>&)>;

/// Splits `layers` blocks into `stages` contiguous ranges whose sizes differ by at most one; the
/// first (layers % stages) stages get the extra block. Throws ppctl::PlanError if stages < 1 or
/// layers < stages.
std::vector<LayerRange> partition_uniform(int64_t layers, int64_t stages);

/// Parameter counts of the decoder built by model/ (must match torch's count exactly), f = ffn_hidden_of:
/// gpt2: block = 4 h^2 + 2 h f + 9 h + f (two LayerNorms, fused QKV with bias, projection with bias, MLP
/// with biases; 12 h^2 + 13 h at f = 4h); embedding = vocab h + seq_len h (token and learned position
/// embeddings); head = 2 h + vocab h (final LayerNorm and the bias-free LM head).
/// llama (kv = kv_heads x hidden / heads): block = 2 h + 2 h^2 + 2 h kv + 3 h f (two RMSNorms, q, k, v, o,
/// gate, up, down, no biases); embedding = vocab h; head = h + vocab h (final RMSNorm and LM head).
/// Whole counts (every tensor-parallel rank's share together); one tp rank's: plan/tensor_parallel.hpp.
int64_t block_parameters(const config::ModelSpec& model);
int64_t embedding_parameters(const config::ModelSpec& model);
int64_t head_parameters(const config::ModelSpec& model);

/// Which rank runs each of the p x v stages.
enum class Placement {
  Loop,  ///< stage k on rank k mod p (GPipe, 1F1B, interleaved 1F1B; Megatron's virtual pipeline)
  V,     ///< stage k on rank k for k < p, on rank 2p-1-k otherwise (ZBV, arXiv 2401.10241 §6)
};

/// stage_to_rank for `ranks` ranks holding `virtual_stages` stages each under `placement`.
/// Throws ppctl::PlanError if ranks < 1, virtual_stages < 1, or V with virtual_stages != 2.
std::vector<int64_t> place_stages(int64_t ranks, int64_t virtual_stages, Placement placement);

/// The placement a schedule kind uses (V for zbv, Loop otherwise; custom schedules bring their own).
Placement default_placement(config::ScheduleKind kind);

/// One pipeline stage.
struct StageLayout {
  int64_t stage = 0;           ///< stage index s in [0, p)
  int64_t rank = 0;            ///< pipeline rank that runs it (stage_to_rank[s]), in every replica
  LayerRange layers;           ///< blocks it owns
  bool has_embedding = false;  ///< true on stage 0
  bool has_head = false;       ///< true on stage p-1 (final norm, LM head, loss)
  int64_t parameters = 0;      ///< parameters it holds (count, not bytes), all its tp ranks together (one tp
                               ///< rank's: plan::stage_parameters); with tied embeddings the last stage's LM head
                               ///< counts here (a copy), a lone stage's does not
  int64_t tied_copy = 0;       ///< of `parameters`, the LM head's copy of the tied token embedding
                               ///< (vocab x hidden) on the last of several stages; 0 otherwise
};

/// The whole layout for a job.
struct Layout {
  int64_t world_size = 0;         ///< ranks = t x dp x p
  int64_t pipeline_size = 0;      ///< pipeline-parallel size p (pipeline.stages): pipeline ranks per replica
  int64_t data_parallel = 1;      ///< data-parallel size dp (plan/parallel.hpp; 0 in the spec = 1)
  int64_t tensor_parallel = 1;    ///< tensor-parallel size t (pipeline.tensor_parallel): ranks per stage
  /// The job's rank grid (plan/rank_grid.hpp): which global rank holds which tp rank of which replica's pipeline
  /// rank.
  RankGrid grid() const { return RankGrid(tensor_parallel, data_parallel, pipeline_size); }
  int64_t num_stages = 0;         ///< p x v (every virtual stage counted)
  int64_t num_microbatches = 0;   ///< m
  std::vector<StageLayout> stages;         ///< indexed by stage
  std::vector<int64_t> stage_to_rank;      ///< size num_stages
  int64_t total_parameters = 0;   ///< distinct parameters: the sum over stages, less the last
                                  ///< stage's copy of the tied embedding (model.tie_embeddings),
                                  ///< i.e. sum of stages[s].parameters - stages[s].tied_copy
  double bubble_fraction = 0.0;   ///< (p-1)/(m+p-1), equal-cost F and B (GPipe paper §2.2; arXiv 2104.04473 §2.2)
};

/// Bubble fraction of GPipe and 1F1B with equal per-stage costs: (p-1)/(m+p-1).
double bubble_fraction(int64_t stages, int64_t microbatches);

/// The split of model.layers over the p x v stages the spec asks for: pipeline.layers_per_stage when
/// given, else balance auto's (plan/balance.hpp, FLOP costs, confirmed with `step_time` when given), else
/// partition_uniform. Throws ppctl::PlanError when the model cannot be split that way.
std::vector<LayerRange> spec_split(const config::JobSpec& spec, const StepTimeOf* step_time = nullptr);

/// Lays out the spec's model as p x v stages (spec_split over all of them) on p ranks, in
/// each of pipeline.data_parallel replicas (0 counts as 1).
/// `stage_to_rank` overrides the schedule's default placement (custom schedules infer it from their
/// file); it must have p x v entries, each in [0, p). `step_time` confirms balance auto's choice (see
/// spec_split). Throws ppctl::PlanError when the model cannot be split (layers < p x v, or a
/// layers_per_stage that does not fit) or the placement does not fit.
Layout make_layout(const config::JobSpec& spec, const std::vector<int64_t>* stage_to_rank = nullptr,
                   const StepTimeOf* step_time = nullptr);

}  // namespace ppctl::plan
