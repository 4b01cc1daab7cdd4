// The parameters one tensor-parallel rank holds, by model part and by stage, and the tp sizes a model allows
// (see tensor_parallel.hpp).
#include "plan/tensor_parallel.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace ppctl::plan {

int64_t vocab_shard_rows(int64_t vocab, int64_t tensor_parallel) {
  PPCTL_ASSERT(tensor_parallel >= 1, "vocab_shard_rows: tensor_parallel below 1");
  return (vocab + tensor_parallel - 1) / tensor_parallel;
}

int64_t ParameterSplit::per_rank(int64_t tensor_parallel) const {
  PPCTL_ASSERT(tensor_parallel >= 1, "ParameterSplit::per_rank: tensor_parallel below 1");
  return (split + tensor_parallel - 1) / tensor_parallel + replicated +
         vocab_shard_rows(vocab_rows, tensor_parallel) * row_width;
}

ParameterSplit block_parameter_split(const config::ModelSpec& model) {
  const int64_t h = model.hidden;
  const int64_t f = config::ffn_hidden_of(model);
  if (config::llama_family(model.arch)) {
    const int64_t d = config::head_dim_of(model);
    const int64_t q = model.heads * d, kv = config::kv_heads_of(model) * d;
    const int64_t biases = model.arch == config::Arch::Qwen2 ? q + 2 * kv : 0;
    const int64_t qk_norms = model.arch == config::Arch::Qwen3 ? 2 * d : 0;
    return {2 * h * q + 2 * h * kv + 3 * h * f + biases, 2 * h + qk_norms, 0, 0};
  }
  // qkv 3h^2 + 3h, proj h^2, fc1 h f + f, fc2 f h; ln1, ln2 4h; proj and fc2 biases 2h.
  return {4 * h * h + 3 * h + 2 * h * f + f, 6 * h, 0, 0};
}

ParameterSplit embedding_parameter_split(const config::ModelSpec& model) {
  const int64_t positions = model.arch == config::Arch::Gpt2 ? model.seq_len * model.hidden : 0;
  return {0, positions, model.vocab_size, model.hidden};
}

ParameterSplit head_parameter_split(const config::ModelSpec& model) {
  const int64_t norm = config::llama_family(model.arch) ? model.hidden : 2 * model.hidden;
  return {0, norm, model.vocab_size, model.hidden};
}

StageParameters stage_parameters(const config::ModelSpec& model, int64_t blocks, bool has_embedding, bool has_head,
                                 int64_t tensor_parallel) {
  StageParameters out;
  out.parameters = blocks * block_parameter_split(model).per_rank(tensor_parallel) +
                   (has_embedding ? embedding_parameter_split(model).per_rank(tensor_parallel) : 0) +
                   (has_head ? head_parameter_split(model).per_rank(tensor_parallel) : 0);
  // Tied: one stage with both ends shares one weight; otherwise the last stage's LM head is a copy of the token
  // embedding (its shard), counted on its stage.
  const int64_t tied =
      model.tie_embeddings && has_head ? vocab_shard_rows(model.vocab_size, tensor_parallel) * model.hidden : 0;
  if (has_embedding) out.parameters -= tied;
  out.tied_copy = has_embedding ? 0 : tied;
  return out;
}

std::vector<int64_t> tensor_parallel_sizes(const config::ModelSpec& model, int64_t most) {
  std::vector<int64_t> sizes;
  const int64_t ffn = config::ffn_hidden_of(model);
  const int64_t kv = config::kv_heads_of(model);
  for (int64_t t = 1; t <= most; ++t) {
    const bool heads = model.heads % t == 0 && (!config::llama_family(model.arch) || kv % t == 0);
    // seq_len too: a configuration named with tensor_parallel t has sequence parallelism on (its default)
    if (heads && ffn % t == 0 && model.vocab_size >= t && model.seq_len % t == 0) sizes.push_back(t);
  }
  return sizes;
}

}  // namespace ppctl::plan
