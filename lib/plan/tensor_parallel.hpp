// How tensor parallelism divides the model, as the plan counts it: the parameters one tensor-parallel (tp) rank
// holds (split ones / t, replicated ones whole, vocabulary shards of at most ceil(vocab / t) rows) and the tp sizes a
// model allows. Mirrors model/tensor_parallel.hpp (Megatron-LM's layers, arXiv 1909.08053 §3). Pure; no torch.
#pragma once

#include <cstdint>
#include <vector>

#include "config/job_spec.hpp"

namespace ppctl::plan {

/// The parameters of one part of the model (a block, the embedding, the head) by how a tp group holds them.
/// Counts, not bytes.
struct ParameterSplit {
  int64_t split = 0;       ///< divided evenly over the t ranks: column-parallel weights and biases (q, k, v, qkv,
                           ///< gate, up, fc1), row-parallel weights (o, proj, down, fc2); t divides them (rules.cpp)
  int64_t replicated = 0;  ///< whole on every rank: norms, row-parallel biases, gpt2's position embedding
  int64_t vocab_rows = 0;  ///< rows split by vocabulary (token embedding, LM head): vocab, each `row_width` wide
  int64_t row_width = 0;   ///< hidden
  /// All of it, as one unsplit rank holds it.
  int64_t whole() const { return split + replicated + vocab_rows * row_width; }
  /// What the largest tp rank of `tensor_parallel` t holds (tp rank 0: the first vocabulary shard is never the
  /// shorter one): split / t + replicated + vocab_shard_rows(vocab_rows, t) x row_width. whole() at t = 1.
  int64_t per_rank(int64_t tensor_parallel) const;
};

/// Rows of the largest vocabulary shard: ceil(vocab / t), model/tensor_parallel.hpp's shard_range (no padding; the
/// first vocab mod t shards hold one row more than the others).
int64_t vocab_shard_rows(int64_t vocab, int64_t tensor_parallel);

/// One transformer block (layout.hpp's block_parameters: the same terms). gpt2: split = qkv (3h^2 + 3h, weight and
/// bias by output rows), proj weight h^2, fc1 (h f + f), fc2 weight f h; replicated = ln1, ln2 (4h) and the proj
/// and fc2 biases (2h). llama (q = heads x head_dim, kv = kv_heads x head_dim): split = q, o (h q each), k, v (h kv
/// each), gate, up, down (h f each) and qwen2's q, k, v biases (q + 2 kv); replicated = the two RMSNorms (2h) and
/// qwen3's q and k norms (2 head_dim).
ParameterSplit block_parameter_split(const config::ModelSpec& model);

/// The embedding: the token embedding by vocabulary rows; gpt2's learned positions (seq_len x h) replicated.
ParameterSplit embedding_parameter_split(const config::ModelSpec& model);

/// The head: the final norm replicated (LayerNorm 2h, RMSNorm h), the LM head by vocabulary rows.
ParameterSplit head_parameter_split(const config::ModelSpec& model);

/// The parameters one tp rank (the largest) of one pipeline stage holds, and of them its LM head's copy of a
/// tied token embedding.
struct StageParameters {
  int64_t parameters = 0;  ///< blocks + embedding + head (the head's tied copy included, see tied_copy)
  int64_t tied_copy = 0;   ///< the last of several stages' LM head copying the tied embedding (its shard), else 0
};

/// A stage of `blocks` blocks, with the embedding and / or the head, at tensor_parallel t (1: the whole stage,
/// plan::StageLayout::parameters). With model.tie_embeddings a stage holding both ends shares one weight (the
/// head adds nothing); the last of several stages holds a copy of the embedding's shard (tied_copy).
StageParameters stage_parameters(const config::ModelSpec& model, int64_t blocks, bool has_embedding, bool has_head,
                                 int64_t tensor_parallel);

/// The tensor-parallel sizes `model` allows up to `most` (the GPUs of one node: a tp group's all-reduces stay on
/// its NVLink, arXiv 2104.04473 §3.3), ascending, 1 first: t dividing heads, kv_heads (llama family), the ffn
/// width and seq_len (sequence parallelism, on by default), with vocab >= t. The same conditions as config/rules.cpp's check_tensor_parallel, for searches that try
/// sizes before a spec exists (the memory warning; `ppctl plan --tune` checks each candidate by the rules too).
std::vector<int64_t> tensor_parallel_sizes(const config::ModelSpec& model, int64_t most = 8);

}  // namespace ppctl::plan
