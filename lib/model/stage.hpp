// A pipeline stage of a decoder built by global layer index: a contiguous range of blocks, plus the
// embedding (first stage) and the final norm, LM head and loss (last stage). The blocks and norms come
// from the architecture's file (model/gpt2.hpp, model/llama.hpp); this file is the same for every one.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.hpp"
#include "model/block.hpp"
#include "model/tensor_parallel.hpp"
#include "plan/layout.hpp"

namespace ppctl::model {

/// The part of the decoder one pipeline stage runs. Parameter names carry global indices
/// (`block3.qkv.weight`, `tok_embed.weight`, `lm_head.weight`), the same in every partition.
/// model.arch chooses the blocks (gpt2: Gpt2Block, llama: LlamaBlock), the final norm `ln_f`
/// (LayerNorm / RMSNorm) and whether the embedding adds learned positions `pos_embed` (gpt2 only).
/// The embedding and the head are initialised from init_seed(seed, -1) and (-2): N(0, 0.02).
class StageModuleImpl : public torch::nn::Module {
 public:
  /// Builds (and initialises from `seed`) exactly the layers of `layout` on the CPU: at tensor-parallel rank
  /// `tp.rank` of `tp.size`, this rank's shards (model/tensor_parallel.hpp; the token embedding and LM head
  /// split by vocabulary rows), cut from the same whole draws as at t = 1.
  StageModuleImpl(const config::ModelSpec& spec, const plan::StageLayout& layout, uint64_t seed,
                  const TensorParallel& tp = {});

  /// First stage: token ids [batch, seq_len] int64 -> hidden [batch, seq_len, hidden].
  /// Middle stages: hidden -> hidden. Last stage: -> logits [batch, seq_len, vocab_size], at t > 1 this
  /// rank's vocabulary rows only [batch, seq_len, rows] (vocab_rows()). With sequence parallelism every hidden
  /// state is this rank's part of the sequence, [batch, seq_len / t, hidden] (model::sequence_range); the
  /// token ids and the logits cover the whole sequence.
  /// The same as forward_parts(input, 0, num_parts(), dropout).
  torch::Tensor forward(const torch::Tensor& input, const MicrobatchContext& context);

  /// The parts of the stage in the order forward() runs them: the embedding (first stage only),
  /// one part per block, then the final norm and LM head together (last stage only). Activation
  /// recomputation cuts a stage into segments at part boundaries.
  int64_t num_parts() const;

  /// Runs parts [begin, end) (0 <= begin <= end <= num_parts()) on `input`: token ids when `begin`
  /// is the embedding, hidden states [batch, seq_len, hidden] otherwise. Dropout masks depend on
  /// the layer, not on the range, so running the parts range by range equals forward().
  torch::Tensor forward_parts(const torch::Tensor& input, int64_t begin, int64_t end,
                              const MicrobatchContext& context);

  /// The context of one microbatch on this stage, built once and used by every part (and every recomputation):
  /// `dropout`; with `positions` and `documents` ([batch, seq_len] int64 on the CPU, packed conversations) the
  /// positions on `device`, the conversations' boundaries — on CUDA under bf16 as cu_seqlens for the
  /// variable-length flash kernel (model::segment_offsets), else as the block-diagonal causal mask
  /// (model::block_causal_mask) — and, for the llama family, the rotary tables gathered at the positions; without
  /// them (undefined) the rotary tables of positions 0 .. seq_len - 1 and causal attention. seq_len is the whole
  /// sequence's (model.seq_len), under SP too.
  MicrobatchContext context(const DropoutContext& dropout, const torch::Tensor& positions = {},
                            const torch::Tensor& documents = {},
                            const torch::Device& device = torch::kCPU) const;

  /// The parts at which checkpoint segments start when the input of every `every`-th block
  /// (counted from the stage's first block) is kept: the embedding and the head are segments of
  /// their own, the blocks are cut into runs of `every` (the last run may be shorter). Ascending,
  /// starting with 0. `every` >= 1.
  std::vector<int64_t> segment_starts(int64_t every) const;

  /// Cross-entropy (nats) of each token, [batch x seq_len] fp32, of logits [batch, seq_len, vocab] against targets
  /// [batch, seq_len] int64. Only meaningful on the last stage. At t > 1 the logits are this rank's rows and
  /// the losses come from model::vocab_parallel_cross_entropy (collective over the tensor-parallel group).
  torch::Tensor token_losses(const torch::Tensor& logits, const torch::Tensor& targets) const;
  /// The sum of token_losses weighted by `target_mask` ([batch, seq_len] fp32, 1 for the loss's targets, 0
  /// elsewhere; undefined = every token): a scalar, the numerator of the per-token loss (Megatron-Core's
  /// calculate_per_token_loss). A microbatch without targets gives 0, never NaN.
  torch::Tensor loss_sum(const torch::Tensor& logits, const torch::Tensor& targets,
                         const torch::Tensor& target_mask = {}) const;
  /// The mean of token_losses (nats per token): the loss of one unmasked microbatch (tests, tools).
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& targets) const;

  /// The vocabulary rows [begin, end) this rank's embedding and head hold (model::shard_range; all of them at
  /// t = 1).
  std::pair<int64_t, int64_t> vocab_rows() const;

  /// The whole tensor of parameter `name` (its global name, as named_parameters() gives it) from `shard`, a tensor
  /// of that parameter's shape on this rank (the parameter, its gradient, or AdamW state of it): at t > 1 a
  /// collective over the tensor-parallel group (model::gather_shards; every rank of the group must call it for the
  /// same name in the same order); `shard` itself when the parameter is replicated or t = 1.
  torch::Tensor whole_of(const std::string& name, const torch::Tensor& shard) const;

  /// The whole shape of parameter `name` whose shard on this rank has `shard_sizes` (no communication).
  std::vector<int64_t> whole_sizes(const std::string& name, at::IntArrayRef shard_sizes) const;

  /// This rank's shard of `whole`, the whole tensor of parameter `name` (model::take_shard; `whole` itself when
  /// replicated or t = 1). No communication.
  torch::Tensor shard_of(const std::string& name, const torch::Tensor& whole) const;

  /// The tensor-parallel group the stage was built for.
  const TensorParallel& tensor_parallel() const { return tp_; }

  /// runtime.precision: with Bf16 and Bf16Params every forward_parts runs under AutocastGuard (bf16
  /// matrix products) and the head returns fp32 logits, so the loss is fp32. Bf16Params also turns
  /// the embedding's output into fp32, so that the residual stream between blocks (and what the
  /// executor sends) is fp32 under both; it does not convert the weights (the optimizer does, once it
  /// holds their fp32 main copies: train::ReplicatedOptimizer, train::DistributedOptimizer).
  void set_precision(config::Precision precision) { precision_ = precision; }

  /// With model.tie_embeddings and the embedding and head on different stages: this stage's copy
  /// of the tied weight [vocab, hidden] (the first stage's `tok_embed.weight`, the last stage's
  /// `lm_head.weight`, initialised identically); undefined otherwise (untied, a middle stage, or one
  /// stage holding both ends, where the head simply uses `tok_embed.weight`).
  torch::Tensor tied_weight() const;

  bool has_embedding() const { return layout_.has_embedding; }
  bool has_head() const { return layout_.has_head; }
  const plan::StageLayout& layout() const { return layout_; }

 private:
  config::ModelSpec spec_;
  plan::StageLayout layout_;
  config::Precision precision_ = config::Precision::Fp32;
  TensorParallel tp_;
  VocabParallelEmbedding tok_embed_{nullptr};
  torch::nn::Embedding pos_embed_{nullptr};
  std::vector<std::shared_ptr<DecoderBlock>> blocks_;
  torch::nn::AnyModule ln_f_;
  ParallelLinear lm_head_{nullptr};
  /// Llama family: the rotary tables of positions 0 .. seq_len - 1, [seq_len, head_dim] fp32, built once with the
  /// stage and moved with it (buffers, not parameters: no gradient, no checkpoint); microbatches without
  /// positions share them, microbatches with positions gather their rows from them.
  torch::Tensor rope_cos_, rope_sin_;
};
TORCH_MODULE(StageModule);

/// The layout of an unpipelined model: one stage with every block, the embedding and the head.
plan::StageLayout whole_model_layout(const config::ModelSpec& spec);

}  // namespace ppctl::model
