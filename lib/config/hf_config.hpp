// Hugging Face config.json <-> the model section of a job spec, for GPT2LMHeadModel, LlamaForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM and MistralForCausalLM (the keys as transformers 5 writes them). Torch-free: the loader merges a
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
  std::string architecture;  ///< `GPT2LMHeadModel`, `LlamaForCausalLM`, `Qwen2ForCausalLM`, ...
  std::vector<HfModelField> fields;
};

/// Reads DIR/config.json. The architecture comes from `architectures` (its first entry) or, when that
/// is absent, `model_type` (`gpt2`, `llama`, `qwen2`, `qwen3`, `mistral`). Mapped keys:
///   GPT-2: n_embd -> hidden, n_layer -> layers, n_head -> heads, n_positions -> seq_len (upper bound),
///     vocab_size, activation_function (gelu_new/gelu_pytorch_tanh -> gelu_tanh, gelu -> gelu),
///     layer_norm_epsilon -> norm_eps, n_inner (null -> 0, the 4h rule) -> ffn_hidden,
///     tie_word_embeddings (default true) -> tie_embeddings; arch gpt2.
///   Llama, Qwen2, Qwen3, Mistral: hidden_size, intermediate_size -> ffn_hidden, num_hidden_layers,
///     num_attention_heads, num_key_value_heads (default heads) -> kv_heads, head_dim (Qwen3's default
///     128), rms_norm_eps -> norm_eps, rope_theta (top level, or inside rope_parameters / rope_scaling)
///     -> rope_theta, the RoPE scaling (rope_scaling, else rope_parameters, as transformers 5 resolves
///     them) -> rope_scaling (a JSON object; only for a type other than default), vocab_size,
///     tie_word_embeddings (default false), max_position_embeddings -> seq_len (upper bound),
///     sliding_window when in effect -> sliding_window; arch llama, qwen2, qwen3 or mistral.
/// Throws ppctl::CheckpointError naming the file and key for: no or unreadable config.json, invalid
/// JSON, another architecture, a missing or mistyped key, and variants ppctl does not implement
/// (another activation, RoPE types other than default, linear, llama3 and yarn, partial rotary
/// embeddings, attention biases other than Qwen2's, MLP biases, GPT-2's scale_attn_by_inverse_layer_idx
/// or reorder_and_upcast_attn).
HfModelConfig read_hf_model_config(const std::filesystem::path& dir);

/// The config.json (pretty-printed JSON text) of `model` as transformers.AutoConfig reads it:
/// GPT2LMHeadModel for arch gpt2 (n_positions = seq_len); LlamaForCausalLM, Qwen2ForCausalLM,
/// Qwen3ForCausalLM or MistralForCausalLM for the llama family (max_position_embeddings = seq_len,
/// head_dim, rope_parameters with the scaling, also as rope_scaling when it is not default, the sliding
/// window as each class spells it); dtype float32.
std::string hf_config_json(const ModelSpec& model);

}  // namespace ppctl::config
