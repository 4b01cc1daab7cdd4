// Hugging Face config.json <-> the model section of a job spec, for GPT2LMHeadModel, LlamaForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM and MistralForCausalLM (the keys as transformers 5 writes them). Torch-free: the loader merges a
// model.init_from folder's config.json into the spec while it validates it, and `ppctl export`
// writes the inverse.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
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

/// One token-id key of config.json (`bos_token_id`, `eos_token_id`, `pad_token_id`).
struct HfTokenId {
  std::vector<int64_t> ids;  ///< empty: none (absent, null, or not an integer or a list of integers)
  bool list = false;         ///< config.json gave a list (Llama 3 instruct models list several eos ids)
};

/// The token-id keys of config.json, as an export writes them back.
struct HfTokenIds {
  HfTokenId bos, eos, pad;
};

/// config.json read as ppctl model fields.
struct HfModelConfig {
  std::string architecture;  ///< `GPT2LMHeadModel`, `LlamaForCausalLM`, `Qwen2ForCausalLM`, ...
  std::vector<HfModelField> fields;
  HfTokenIds token_ids;      ///< bos_token_id, eos_token_id, pad_token_id; not checked against vocab_size
};

/// Reads DIR/config.json (parse_hf_model_config of its text). Throws ppctl::CheckpointError naming the
/// file when it cannot be read, and as parse_hf_model_config does.
HfModelConfig read_hf_model_config(const std::filesystem::path& dir);

/// Parses `text`, the content of config.json `file` (which messages name). The architecture comes from `architectures` (its first entry) or, when that
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
/// or reorder_and_upcast_attn). The token ids are read leniently (anything but an integer, or for a list
/// only integers, counts as none): they do not change the model, and ppctl never refuses a folder for them.
HfModelConfig parse_hf_model_config(std::string_view text, const std::filesystem::path& file);

/// What the config.json of an export takes from the model.init_from folder the model came from rather
/// than from the model itself (interop/hf_source_files.hpp decides what, and when).
struct HfSourceKeys {
  HfTokenIds token_ids;                 ///< bos_token_id, eos_token_id, pad_token_id; none is written null
  int64_t max_position_embeddings = 0;  ///< llama family: the longest context written (>= seq_len; rotary
                                        ///< positions have no weights); 0: seq_len. Unused for GPT-2, whose
                                        ///< n_positions is the rows of wpe: seq_len.
};

/// The config.json (pretty-printed JSON text) of `model` as transformers.AutoConfig reads it:
/// GPT2LMHeadModel for arch gpt2 (n_positions = seq_len); LlamaForCausalLM, Qwen2ForCausalLM,
/// Qwen3ForCausalLM or MistralForCausalLM for the llama family (max_position_embeddings = seq_len,
/// head_dim, rope_parameters with the scaling, also as rope_scaling when it is not default, the sliding
/// window as each class spells it); dtype float32; bos_token_id, eos_token_id and pad_token_id from
/// `source` (null when it has none, so that transformers' class defaults, e.g. GPT-2's 50256, never
/// name ids outside a smaller vocabulary).
std::string hf_config_json(const ModelSpec& model, const HfSourceKeys& source = {});

}  // namespace ppctl::config
