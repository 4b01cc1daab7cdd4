// Tensor parallelism inside a pipeline stage (Megatron-LM: Shoeybi et al., arXiv 1909.08053 §3): which slice of
// each parameter a tensor-parallel rank holds, the two autograd regions f and g, column- and row-parallel linear
// layers, the vocabulary-parallel embedding and the vocabulary-parallel cross-entropy.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"

namespace ppctl::model {

/// The tensor-parallel group of one stage's ranks: `size` t ranks (adjacent global ranks, plan/rank_grid.hpp)
/// that each hold 1/t of every split parameter. `group` is null exactly when size is 1; every collective below is
/// then the identity.
struct TensorParallel {
  int64_t size = 1;
  int64_t rank = 0;
  comm::Communicator* group = nullptr;
  /// Sequence parallelism (Korthikanti et al., arXiv 2205.05198 §4.2.2): outside the tensor-parallel regions the
  /// activations [batch, seq, hidden] are split along the sequence, rank r holding positions [r s/t, (r+1) s/t).
  bool sequence_parallel = false;
  bool active() const { return size > 1; }
  bool splits_sequence() const { return active() && sequence_parallel; }
};

/// How one parameter is split over the tensor-parallel ranks: along dimension `dim` (-1: replicated, every rank
/// holds all of it), viewed as `parts` equal fused components (GPT-2's qkv rows are q | k | v: parts 3), each
/// component cut into t contiguous shards; a rank holds its shard of every component, in component order.
struct Split {
  int64_t dim = -1;
  int64_t parts = 1;
  bool replicated() const { return dim < 0; }
};

/// Rows [begin, end) of `n` that tensor-parallel rank `rank` of `size` holds, contiguous and in rank order: n / size
/// rows each, and one more on the first n mod size ranks when size does not divide n (the vocabulary: no padding
/// rows, so nothing padded ever reaches a checkpoint, an export or the loss, and every rank holds at least one
/// row). 0 <= rank < size <= n.
std::pair<int64_t, int64_t> shard_range(int64_t n, int64_t size, int64_t rank);

/// The split of the stage parameter `name` (`block3.q_proj.weight`, `tok_embed.weight`; model/stage.hpp's names)
/// in ppctl's Megatron-style layers: column-parallel (dim 0 of weight and bias) q_proj, k_proj, v_proj, gate_proj,
/// up_proj, fc1, qkv (parts 3), the token embedding and the LM head (vocabulary rows, shard_range); row-parallel (dim 1 of the
/// weight; the bias replicated) o_proj, down_proj, proj, fc2; everything else (norms, positions) replicated.
Split parameter_split(const std::string& name);

/// Rank `rank`'s shard (of `size`) of the whole tensor `full` split by `split` (a view when contiguous along the
/// split; `full` itself when replicated).
torch::Tensor take_shard(const torch::Tensor& full, const Split& split, int64_t size, int64_t rank);

/// The whole tensor of shape `full_sizes` from every rank's `shard` (this rank's, of take_shard's shape),
/// identical on every rank of `tp`: one all-reduce of a zero-filled whole tensor into which each rank writes its
/// shard (adding zeros is exact, so the result is bitwise every rank's values). Collective over tp.group; returns
/// `shard` itself when replicated or t = 1. Throws ppctl::CommTimeout / CommError from the group.
torch::Tensor gather_shards(const torch::Tensor& shard, const Split& split, const std::vector<int64_t>& full_sizes,
                            const TensorParallel& tp);

/// Whether the gradient of the stage parameter `name` (model/stage.hpp's names, or a block's own) is, on each rank
/// of `tp`, a partial sum that must be summed over the group: a replicated parameter applied to this rank's part of
/// the data. Under sequence parallelism every replicated one (norms, row-parallel biases, gpt2's positions: this
/// rank's positions); at any t > 1 qwen3's q_norm and k_norm (this rank's heads). False at t = 1. Megatron-Core sums
/// the former once per step, after the backward of every microbatch (finalize_model_grads'
/// _allreduce_layernorm_grads, its `sequence_parallel` parameters), as ppctl's trainer does
/// (optim::GradientBuffers, before the data-parallel reduction), rather than in every microbatch's backward.
bool gradient_is_partial(const std::string& name, const TensorParallel& tp);

/// The gradients (`.grad`, views, in named_parameters() order) of `module`'s parameters for which
/// gradient_is_partial holds; none at t = 1. A parameter without a gradient yet is refused (ppctl::InternalError).
std::vector<torch::Tensor> partial_gradients(const torch::nn::Module& module, const TensorParallel& tp);

/// Sums `gradients` (partial_gradients' tensors, written in place) over tp.group in one all-reduce of their
/// concatenation (one collective however many there are; nothing at t = 1 or with none). Every rank of the group
/// calls it with the same parameters in the same order. Throws ppctl::CommTimeout / CommError from the group.
void sum_partial_gradients(const std::vector<torch::Tensor>& gradients, const TensorParallel& tp);

/// Megatron's f (copy_to_tensor_model_parallel_region): identity forward; backward sums the gradient over the
/// group (all-reduce). Applied once to the input shared by the column-parallel layers that read it (q, k, v;
/// gate and up) without sequence parallelism. `x` any shape.
torch::Tensor tensor_parallel_copy(const torch::Tensor& x, const TensorParallel& tp);

/// Megatron's g (reduce_from_tensor_model_parallel_region): forward sums `x` over the group (all-reduce);
/// backward is the identity. Ends a row-parallel layer and the vocabulary-parallel embedding.
torch::Tensor tensor_parallel_reduce(const torch::Tensor& x, const TensorParallel& tp);

/// Into a tensor-parallel region: the input shared by the column-parallel layers that read it. Without sequence
/// parallelism tensor_parallel_copy (f); with it, Megatron's gather_from_sequence_parallel_region: [batch, s / t,
/// hidden] -> [batch, s, hidden], all-gathered along the sequence forward and reduce-scattered backward.
torch::Tensor enter_tensor_parallel(const torch::Tensor& x, const TensorParallel& tp);

/// Out of a tensor-parallel region: the partial sums of a row-parallel layer or the vocabulary-parallel embedding,
/// [batch, s, hidden]. Without sequence parallelism tensor_parallel_reduce (g: all-reduce); with it, Megatron's
/// reduce_scatter_to_sequence_parallel_region: summed over the group and this rank's s / t positions kept,
/// [batch, s / t, hidden] (backward: all-gather).
torch::Tensor leave_tensor_parallel(const torch::Tensor& x, const TensorParallel& tp);

/// Positions [begin, end) of a sequence of `seq` that this rank holds between tensor-parallel regions: all of them
/// without sequence parallelism, else the rank's s / t (seq divisible by t).
std::pair<int64_t, int64_t> sequence_range(int64_t seq, const TensorParallel& tp);

/// Which way a linear layer is split (arXiv 1909.08053 §3, fig. 3): not at all, by output features (column:
/// weight rows and bias; the output stays split) or by input features (row: weight columns; the output is summed
/// over the group by g, then the whole bias is added).
enum class ParallelStyle { Replicated, Column, Row };

/// A linear layer [in] -> [out] of a tensor-parallel rank: parameters `weight` and (when `bias`) `bias` under the
/// same names as torch::nn::Linear, holding this rank's shard (parameter_split). Column: input [..., in] (already
/// through enter_tensor_parallel), output [..., out / t]. Row: input [..., in / t], output [..., out] through
/// leave_tensor_parallel (g, or a reduce-scatter along the sequence), then the bias (whose gradient is summed over
/// the group with sequence parallelism). Replicated, or t = 1: exactly torch::nn::Linear.
class ParallelLinearImpl : public torch::nn::Module {
 public:
  ParallelLinearImpl(int64_t in, int64_t out, bool bias, ParallelStyle style, const TensorParallel& tp,
                     int64_t parts = 1);
  torch::Tensor forward(const torch::Tensor& x);
  /// Fills the weight with this rank's shard of a whole [out, in] N(0, std) draw from `gen` (the same draw at
  /// every t, so weights never depend on the layout) and zeroes the bias.
  void init_normal(at::Generator& gen, double std);
  torch::Tensor weight, bias;

 private:
  int64_t in_, out_;
  ParallelStyle style_;
  Split split_;
  TensorParallel tp_;
};
TORCH_MODULE(ParallelLinear);

/// The token embedding split by vocabulary rows (Megatron's VocabParallelEmbedding): parameter `weight`
/// [rows of shard_range(vocab, t, rank), hidden]; forward(ids [batch, seq] int64) -> [batch, seq, hidden] (each
/// rank looks up the ids in its rows, zeros elsewhere, and leave_tensor_parallel sums over the group: with sequence
/// parallelism the result is this rank's [batch, seq / t, hidden]).
class VocabParallelEmbeddingImpl : public torch::nn::Module {
 public:
  VocabParallelEmbeddingImpl(int64_t vocab, int64_t hidden, const TensorParallel& tp);
  torch::Tensor forward(const torch::Tensor& ids);
  /// This rank's rows of a whole [vocab, hidden] N(0, std) draw from `gen`.
  void init_normal(at::Generator& gen, double std);
  torch::Tensor weight;

 private:
  int64_t vocab_, hidden_;
  std::pair<int64_t, int64_t> rows_;
  TensorParallel tp_;
};
TORCH_MODULE(VocabParallelEmbedding);

/// Cross-entropy of each of N tokens, [N] (nats), of logits split by vocabulary (Megatron's
/// vocab_parallel_cross_entropy; arXiv 1909.08053 §3): `logits` [N, rows] fp32, this rank's rows `vocab_begin` ..
/// `vocab_begin + rows` of the vocabulary; `targets` [N] int64, whole ids. No rank holds all the logits: two
/// all-reduces of [t, N] (the ranks' maxima) and [2, N] (sum of exponentials, target logit). Differentiable in
/// `logits`: backward is (softmax - one-hot) times each token's incoming gradient on each rank's rows, without
/// communication. The same as torch cross_entropy with reduction none over the whole logits (up to the order of
/// additions).
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                           int64_t vocab_begin, const TensorParallel& tp);

}  // namespace ppctl::model
