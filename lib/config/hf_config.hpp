// Hugging Face config.json <-> the model section of a job spec, for GPT2LMHeadModel and
// LlamaForCausalLM (the keys as transformers 5 writes them). Torch-free: the loader merges a
// model.init_from folder's config.json into the spec while it validates it, and `ppctl export`
// writes the inverse.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/job_spec.hpp"

namespace ppctl::config {

/// One model field as config.json gives it.
struct HfModelField {
  std::string key;     ///< the ppctl model key (`hidden`, `layers`, `activation`, ...)
  std::string value;   ///< its value as YAML text (`768`, `1e-05`, `gelu_tanh`, `true`)
  std::string source;  ///< the config.json key it came from, for messages (`n_embd`)
  bool upper_bound = false;  ///< true for seq_len: config.json gives the longest context (n_positions,
                             ///< max_position_embeddings); a written seq_len may be shorter, not longer
};

/// config.json read as ppctl model fields.
struct HfModelConfig {
  std::string architecture;  ///< `GPT2LMHeadModel` or `LlamaForCausalLM`
  std::vector<HfModelField> fields;
};

/// Reads DIR/config.json. The architecture comes from `architectures` (its first entry) or, when that
/// is absent, `model_type` (`gpt2`, `llama`). Mapped keys:
///   GPT-2: n_embd -> hidden, n_layer -> layers, n_head -> heads, n_positions -> seq_len (upper bound),
///     vocab_size, activation_function (gelu_new/gelu_pytorch_tanh -> gelu_tanh, gelu -> gelu),
///     layer_norm_epsilon -> norm_eps, n_inner (null -> 0, the 4h rule) -> ffn_hidden,
///     tie_word_embeddings (default true) -> tie_embeddings; arch gpt2.
///   Llama: hidden_size, intermediate_size -> ffn_hidden, num_hidden_layers, num_attention_heads,
///     num_key_value_heads (default heads) -> kv_heads, rms_norm_eps -> norm_eps, rope_theta (top level,
///     or rope_parameters.rope_theta as transformers 5 writes it) -> rope_theta, vocab_size,
///     tie_word_embeddings (default false), max_position_embeddings -> seq_len (upper bound); arch llama.
/// Throws ppctl::CheckpointError naming the file and key for: no or unreadable config.json, invalid
/// JSON, an architecture other than those two, a missing or mistyped key, and variants ppctl does not
/// implement (another activation, rope scaling, attention/MLP biases in Llama, a head_dim other than
/// hidden / heads, GPT-2's scale_attn_by_inverse_layer_idx or reorder_and_upcast_attn).
HfModelConfig read_hf_model_config(const std::filesystem::path& dir);

/// The config.json (pretty-printed JSON text) of `model` as transformers.AutoConfig reads it:
/// GPT2LMHeadModel for arch gpt2 (n_positions = seq_len), LlamaForCausalLM for llama
/// (max_position_embeddings = seq_len), dtype float32.
std::string hf_config_json(const ModelSpec& model);

}  // namespace ppctl::config
