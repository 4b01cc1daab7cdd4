// config.json of a Hugging Face GPT-2 or Llama model read into ppctl model fields, and written back.
#include "config/hf_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/echo.hpp"
#include "core/error.hpp"

namespace ppctl::config {
namespace {

using nlohmann::json;

/// Reads config.json's keys into fields, naming the file in every error.
class Reader {
 public:
  Reader(std::filesystem::path file, const json& root) : file_(std::move(file)), root_(root) {}

  [[noreturn]] void fail(const std::string& key, const std::string& why, const std::string& fix) const {
    throw CheckpointError(fmt::format("{}: {}: {} (fix: {})", file_.string(), key, why, fix));
  }

  const json* find(const std::string& key) const {
    const auto it = root_.find(key);
    return it == root_.end() || it->is_null() ? nullptr : &*it;
  }

  const json& required(const std::string& key) const {
    const json* value = find(key);
    if (value == nullptr) fail(key, "missing", "add it; transformers' save_pretrained writes it");
    return *value;
  }

  /// Required integer keys: config.json key -> ppctl field.
  void integers(std::initializer_list<std::pair<const char*, const char*>> keys) {
    for (const auto& [key, field] : keys) integer(key, field);
  }

  void integer(const std::string& key, const std::string& field, bool upper_bound = false) {
    const json& v = required(key);
    if (!v.is_number_integer()) fail(key, "value " + core::echo_value(v.dump()) + " is not an integer", "write an integer");
    add(field, std::to_string(v.get<int64_t>()), key, upper_bound);
  }

  void number(const json& v, const std::string& key, const std::string& field) {
    if (!v.is_number()) fail(key, "value " + core::echo_value(v.dump()) + " is not a number", "write a number");
    add(field, fmt::format("{:.17g}", v.get<double>()), key);
  }

  void boolean(const std::string& key, const std::string& field, bool default_value) {
    const json* v = find(key);
    if (v != nullptr && !v->is_boolean()) fail(key, "value " + core::echo_value(v->dump()) + " is not true/false", "write true or false");
    add(field, (v != nullptr ? v->get<bool>() : default_value) ? "true" : "false", key);
  }

  /// Keys that must be absent or hold `expected` because ppctl implements only that variant.
  void must_be(const std::string& key, const json& expected, const std::string& what) const {
    const json* v = find(key);
    if (v != nullptr && *v != expected) {
      fail(key, fmt::format("value {}: ppctl implements only {} ({})", core::echo_value(v->dump()), expected.dump(), what),
           "use a model without this variant");
    }
  }

  void add(const std::string& field, std::string value, const std::string& source, bool upper = false) {
    out.fields.push_back({field, std::move(value), source, upper});
  }

  HfModelConfig out;

 private:
  std::filesystem::path file_;
  const json& root_;
};

void read_gpt2(Reader& r) {
  r.add("arch", "gpt2", "model_type");
  r.integers({{"n_embd", "hidden"}, {"n_layer", "layers"}, {"n_head", "heads"}, {"vocab_size", "vocab_size"}});
  r.integer("n_positions", "seq_len", /*upper_bound=*/true);
  const json* act = r.find("activation_function");
  const std::string activation = act != nullptr && act->is_string() ? act->get<std::string>() : "gelu_new";
  if (activation == "gelu_new" || activation == "gelu_pytorch_tanh") {
    r.add("activation", "gelu_tanh", "activation_function");
  } else if (activation == "gelu") {
    r.add("activation", "gelu", "activation_function");
  } else {
    r.fail("activation_function", "value \"" + core::echo_value(activation) + "\": ppctl's GPT-2 has gelu and gelu_new only",
           "use a model with activation_function gelu_new or gelu");
  }
  if (const json* eps = r.find("layer_norm_epsilon")) {
    r.number(*eps, "layer_norm_epsilon", "norm_eps");
  } else {
    r.add("norm_eps", "1e-05", "layer_norm_epsilon");
  }
  const json* inner = r.find("n_inner");  // null: 4 x n_embd, ppctl's rule for 0
  if (inner != nullptr && !inner->is_number_integer()) r.fail("n_inner", "not an integer or null", "write an integer");
  r.add("ffn_hidden", inner != nullptr ? std::to_string(inner->get<int64_t>()) : "0", "n_inner");
  r.boolean("tie_word_embeddings", "tie_embeddings", true);
  r.must_be("scale_attn_weights", true, "attention scaled by 1/sqrt(head_dim)");
  r.must_be("scale_attn_by_inverse_layer_idx", false, "no per-layer attention scaling");
  r.must_be("reorder_and_upcast_attn", false, "plain attention");
}

/// The RoPE parameters as transformers 5 resolves them (RotaryEmbeddingConfigMixin's
/// convert_rope_params_to_dict and standardize_rope_params): `rope_scaling` when given, else
/// `rope_parameters`; rope_theta from inside it, else the top level, else 10000; `type` read as
/// `rope_type`; original_max_position_embeddings defaulting to max_position_embeddings for llama3 and
/// yarn. Adds rope_theta and, for a type other than default, rope_scaling (the remaining parameters as a
/// JSON object, which model.rope_scaling's reader checks). Refuses types ppctl does not implement and a
/// partial_rotary_factor other than 1.
void read_rope(Reader& r) {
  const json* scaling = r.find("rope_scaling");
  const json* params = r.find("rope_parameters");
  const char* key = scaling != nullptr ? "rope_scaling" : "rope_parameters";
  const json* given = scaling != nullptr ? scaling : params;
  if (given != nullptr && !given->is_object()) {
    r.fail(key, "value " + core::echo_value(given->dump()) + " is not an object", "write an object such as {\"rope_type\": \"default\"}");
  }
  json rope = given != nullptr ? *given : json::object();
  if (rope.contains("rope_theta") && !rope["rope_theta"].is_null()) {
    r.number(rope["rope_theta"], std::string(key) + ".rope_theta", "rope_theta");
  } else if (const json* theta = r.find("rope_theta")) {
    r.number(*theta, "rope_theta", "rope_theta");
  } else {
    r.add("rope_theta", "10000", "rope_theta");
  }
  rope.erase("rope_theta");
  std::string type_key = std::string(key) + ".rope_type";
  json type = rope.contains("rope_type") ? rope["rope_type"] : json();
  if (type.is_null() && rope.contains("type")) {
    type = rope["type"];
    type_key = std::string(key) + ".type";
  }
  rope.erase("type");
  const std::string name = type.is_null() ? "default" : type.is_string() ? type.get<std::string>() : type.dump();
  if (name != "default" && name != "linear" && name != "llama3" && name != "yarn") {
    r.fail(type_key, "value " + core::echo_value(type.dump()) + ": ppctl implements the RoPE types default, linear, llama3 and yarn",
           "use a model with one of these RoPE types");
  }
  const json* inside = rope.contains("partial_rotary_factor") ? &rope["partial_rotary_factor"] : nullptr;
  for (const json* partial : {r.find("partial_rotary_factor"), inside}) {
    if (partial != nullptr && !partial->is_null() && *partial != 1 && *partial != 1.0) {
      r.fail("partial_rotary_factor", "value " + core::echo_value(partial->dump()) + ": ppctl rotates every feature of a head (1.0)",
             "use a model without partial rotary embeddings");
    }
  }
  rope.erase("partial_rotary_factor");
  if (name == "default") return;
  rope["rope_type"] = name;
  if ((name == "llama3" || name == "yarn") && (!rope.contains("original_max_position_embeddings") || rope["original_max_position_embeddings"].is_null())) {
    rope["original_max_position_embeddings"] = r.required("max_position_embeddings");
  }
  r.add("rope_scaling", rope.dump(), key);
}

/// The sliding window of Mistral (`sliding_window`, null = none) and of Qwen2 / Qwen3 (in effect when
/// layer_types names a sliding_attention layer or, without layer_types, when use_sliding_window is true
/// and max_window_layers < num_hidden_layers), added as model.sliding_window when it is in effect.
void read_sliding_window(Reader& r, config::Arch arch) {
  const json* window = r.find("sliding_window");
  if (window == nullptr) return;
  if (arch != config::Arch::Mistral) {
    bool sliding = false;
    if (const json* types = r.find("layer_types"); types != nullptr && types->is_array()) {
      for (const auto& t : *types) sliding = sliding || t == "sliding_attention";
    } else if (const json* use = r.find("use_sliding_window"); use != nullptr && *use == true) {
      const json* max_window_layers = r.find("max_window_layers");
      const json& layers = r.required("num_hidden_layers");
      sliding = max_window_layers == nullptr || !max_window_layers->is_number_integer() || !layers.is_number_integer() ||
                max_window_layers->get<int64_t>() < layers.get<int64_t>();
    }
    if (!sliding) return;
  }
  r.integer("sliding_window", "sliding_window");
}

/// LlamaForCausalLM and the architectures built on its block: Qwen2ForCausalLM, Qwen3ForCausalLM,
/// MistralForCausalLM.
void read_llama_family(Reader& r, config::Arch arch) {
  r.add("arch", to_string(arch), "architectures");
  r.integers({{"hidden_size", "hidden"},
              {"intermediate_size", "ffn_hidden"},
              {"num_hidden_layers", "layers"},
              {"num_attention_heads", "heads"},
              {"vocab_size", "vocab_size"}});
  if (r.find("num_key_value_heads") != nullptr) {
    r.integer("num_key_value_heads", "kv_heads");
  } else {
    r.add("kv_heads", "0", "num_key_value_heads");
  }
  if (r.find("head_dim") != nullptr) {
    r.integer("head_dim", "head_dim");
  } else if (arch == config::Arch::Qwen3) {
    r.add("head_dim", "128", "head_dim");  // Qwen3Config's default
  }
  r.number(r.required("rms_norm_eps"), "rms_norm_eps", "norm_eps");
  read_rope(r);
  r.boolean("tie_word_embeddings", "tie_embeddings", false);
  r.integer("max_position_embeddings", "seq_len", /*upper_bound=*/true);
  read_sliding_window(r, arch);
  r.must_be("hidden_act", "silu", "SwiGLU with SiLU");
  if (arch != config::Arch::Qwen2) r.must_be("attention_bias", false, "no biases on q, k, v and o");
  r.must_be("mlp_bias", false, "no MLP biases");
}

/// The Hugging Face class name of a llama-family `arch` and its model_type.
std::pair<const char*, const char*> llama_family_names(config::Arch arch) {
  switch (arch) {
    case config::Arch::Qwen2: return {"Qwen2ForCausalLM", "qwen2"};
    case config::Arch::Qwen3: return {"Qwen3ForCausalLM", "qwen3"};
    case config::Arch::Mistral: return {"MistralForCausalLM", "mistral"};
    default: return {"LlamaForCausalLM", "llama"};
  }
}

/// model.rope_scaling as transformers' rope_parameters (with rope_theta), each type's keys only.
json rope_parameters_json(const ModelSpec& m) {
  const RopeScaling& s = m.rope_scaling;
  json out{{"rope_type", to_string(s.rope_type)}, {"rope_theta", m.rope_theta}};
  if (s.rope_type == RopeType::Default) return out;
  out["factor"] = s.factor;
  if (s.rope_type == RopeType::Llama3) {
    out["low_freq_factor"] = s.low_freq_factor;
    out["high_freq_factor"] = s.high_freq_factor;
  }
  if (s.rope_type == RopeType::Llama3 || s.rope_type == RopeType::Yarn) {
    out["original_max_position_embeddings"] = s.original_max_position_embeddings;
  }
  if (s.rope_type == RopeType::Yarn) {
    if (s.attention_factor > 0) out["attention_factor"] = s.attention_factor;
    out["beta_fast"] = s.beta_fast;
    out["beta_slow"] = s.beta_slow;
    if (s.mscale != 0) out["mscale"] = s.mscale;
    if (s.mscale_all_dim != 0) out["mscale_all_dim"] = s.mscale_all_dim;
    out["truncate"] = s.truncate;
  }
  return out;
}

/// A token-id key read leniently (HfTokenId): an integer, or a list of integers; anything else is none.
HfTokenId token_id(const json* value) {
  HfTokenId out;
  if (value == nullptr) return out;
  if (value->is_number_integer()) {
    out.ids.push_back(value->get<int64_t>());
  } else if (value->is_array()) {
    for (const auto& id : *value) {
      if (!id.is_number_integer()) return {};
      out.ids.push_back(id.get<int64_t>());
    }
    out.list = true;
  }
  return out;
}

/// A token-id key as config.json spells it: null, an integer or a list.
json token_id_json(const HfTokenId& id) {
  if (id.list) return json(id.ids);
  return id.ids.empty() ? json() : json(id.ids.front());
}

}  // namespace

HfModelConfig read_hf_model_config(const std::filesystem::path& dir) {
  const auto file = dir / "config.json";
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) {
    throw CheckpointError(fmt::format("{}: cannot read it (fix: model.init_from must name a Hugging Face model "
                                      "folder holding config.json and model.safetensors)",
                                      core::echo_label(file.string())));
  }
  return parse_hf_model_config(text.str(), file);
}

HfModelConfig parse_hf_model_config(std::string_view text, const std::filesystem::path& file) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    throw CheckpointError(fmt::format("{}: not valid JSON: {} (fix: re-save it with save_pretrained)",
                                      core::echo_label(file.string()), core::escape_control(e.what())));
  }
  if (!root.is_object()) throw CheckpointError(core::echo_label(file.string()) + ": not a JSON object (fix: re-save it)");
  Reader r(file, root);
  std::string architecture;
  if (const json* list = r.find("architectures"); list != nullptr && list->is_array() && !list->empty() &&
                                                  (*list)[0].is_string()) {
    architecture = (*list)[0].get<std::string>();
  } else if (const json* type = r.find("model_type"); type != nullptr && type->is_string()) {
    const auto t = type->get<std::string>();
    architecture = "model_type " + t;
    if (t == "gpt2") architecture = "GPT2LMHeadModel";
    for (const Arch arch : {Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Mistral}) {
      if (t == llama_family_names(arch).second) architecture = llama_family_names(arch).first;
    }
  }
  bool known = architecture == "GPT2LMHeadModel";
  if (known) read_gpt2(r);
  for (const Arch arch : {Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Mistral}) {
    if (architecture == llama_family_names(arch).first) {
      read_llama_family(r, arch);
      known = true;
    }
  }
  if (!known) {
    r.fail(architecture.rfind("model_type", 0) == 0 ? "model_type" : "architectures",
           architecture.empty() ? "neither architectures nor model_type is given"
                                : fmt::format("unsupported architecture '{}'", core::echo_value(architecture)),
           "ppctl imports GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and "
           "MistralForCausalLM");
  }
  r.out.architecture = architecture;
  r.out.token_ids = {token_id(r.find("bos_token_id")), token_id(r.find("eos_token_id")),
                     token_id(r.find("pad_token_id"))};
  return r.out;
}

std::string hf_config_json(const ModelSpec& m, const HfSourceKeys& source) {
  json out;
  if (m.arch == Arch::Gpt2) {
    out = {{"architectures", {"GPT2LMHeadModel"}},
           {"model_type", "gpt2"},
           {"n_embd", m.hidden},
           {"n_layer", m.layers},
           {"n_head", m.heads},
           {"n_positions", m.seq_len},
           {"vocab_size", m.vocab_size},
           {"activation_function", m.activation == Activation::GeluTanh ? "gelu_new" : "gelu"},
           {"layer_norm_epsilon", m.norm_eps},
           {"n_inner", ffn_hidden_of(m)},
           {"resid_pdrop", m.dropout},
           {"embd_pdrop", m.dropout},
           {"attn_pdrop", 0.0},
           {"tie_word_embeddings", m.tie_embeddings},
           {"dtype", "float32"}};
  } else {
    const auto [class_name, model_type] = llama_family_names(m.arch);
    out = {{"architectures", {class_name}},
           {"model_type", model_type},
           {"hidden_size", m.hidden},
           {"intermediate_size", ffn_hidden_of(m)},
           {"num_hidden_layers", m.layers},
           {"num_attention_heads", m.heads},
           {"num_key_value_heads", kv_heads_of(m)},
           {"head_dim", head_dim_of(m)},
           {"vocab_size", m.vocab_size},
           {"rms_norm_eps", m.norm_eps},
           {"rope_theta", m.rope_theta},
           {"rope_parameters", rope_parameters_json(m)},
           {"max_position_embeddings", std::max(m.seq_len, source.max_position_embeddings)},
           {"hidden_act", "silu"},
           {"tie_word_embeddings", m.tie_embeddings},
           {"dtype", "float32"}};
    // transformers 4 reads the scaling from rope_scaling; 5 takes it first when both are given
    if (m.rope_scaling.rope_type != RopeType::Default) out["rope_scaling"] = out["rope_parameters"];
    const json window = m.sliding_window > 0 ? json(m.sliding_window) : json();
    if (m.arch == Arch::Llama || m.arch == Arch::Qwen3) out["attention_bias"] = false;
    if (m.arch == Arch::Llama) out["mlp_bias"] = false;
    if (m.arch == Arch::Mistral) out["sliding_window"] = window;
    if (m.arch == Arch::Qwen2 || m.arch == Arch::Qwen3) {  // every layer slides when a window is kept
      out["use_sliding_window"] = m.sliding_window > 0;
      out["sliding_window"] = window;
      out["max_window_layers"] = m.sliding_window > 0 ? 0 : m.layers;
    }
  }
  out["bos_token_id"] = token_id_json(source.token_ids.bos);
  out["eos_token_id"] = token_id_json(source.token_ids.eos);
  out["pad_token_id"] = token_id_json(source.token_ids.pad);
  return out.dump(2) + "\n";
}

}  // namespace ppctl::config
