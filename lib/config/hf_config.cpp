// config.json of a Hugging Face GPT-2 or Llama model read into ppctl model fields, and written back.
#include "config/hf_config.hpp"

#include <fmt/format.h>

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

void read_llama(Reader& r) {
  r.add("arch", "llama", "model_type");
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
  r.number(r.required("rms_norm_eps"), "rms_norm_eps", "norm_eps");
  // transformers 5 keeps rope_theta inside rope_parameters; older configs have it at the top level.
  const json* params = r.find("rope_parameters");
  if (params != nullptr && params->is_object() && params->contains("rope_theta")) {
    const auto type = params->value("rope_type", std::string("default"));
    if (type != "default") {
      r.fail("rope_parameters.rope_type", "value \"" + core::echo_value(type) + "\": ppctl implements only default RoPE",
             "use a model without RoPE scaling");
    }
    r.number(params->at("rope_theta"), "rope_parameters.rope_theta", "rope_theta");
  } else if (const json* theta = r.find("rope_theta")) {
    r.number(*theta, "rope_theta", "rope_theta");
  } else {
    r.add("rope_theta", "10000", "rope_theta");
  }
  if (const json* scaling = r.find("rope_scaling"); scaling != nullptr && scaling->is_object() &&
                                                  scaling->value("rope_type", std::string("default")) != "default") {
    r.fail("rope_scaling", "value " + core::echo_value(scaling->dump()) + ": ppctl implements only default RoPE",
           "use a model without RoPE scaling");
  }
  r.boolean("tie_word_embeddings", "tie_embeddings", false);
  r.integer("max_position_embeddings", "seq_len", /*upper_bound=*/true);
  r.must_be("hidden_act", "silu", "SwiGLU with SiLU");
  r.must_be("attention_bias", false, "no attention biases");
  r.must_be("mlp_bias", false, "no MLP biases");
  if (const json* head_dim = r.find("head_dim")) {
    const json& hidden = r.required("hidden_size");
    const json& heads = r.required("num_attention_heads");
    if (heads.is_number_integer() && heads.get<int64_t>() > 0 && head_dim->is_number_integer() &&
        head_dim->get<int64_t>() * heads.get<int64_t>() != hidden.get<int64_t>()) {
      r.fail("head_dim", fmt::format("value {}: ppctl needs head_dim = hidden_size / num_attention_heads = {}",
                                     head_dim->dump(), hidden.get<int64_t>() / heads.get<int64_t>()),
             "use a model whose heads split hidden_size evenly");
    }
  }
}

}  // namespace

HfModelConfig read_hf_model_config(const std::filesystem::path& dir) {
  const auto file = dir / "config.json";
  std::ifstream in(file);
  if (!in) {
    throw CheckpointError(fmt::format("{}: cannot read it (fix: model.init_from must name a Hugging Face model "
                                      "folder holding config.json and model.safetensors)",
                                      file.string()));
  }
  json root;
  try {
    root = json::parse(in);
  } catch (const json::exception& e) {
    throw CheckpointError(fmt::format("{}: not valid JSON: {} (fix: re-save it with save_pretrained)",
                                      file.string(), e.what()));
  }
  if (!root.is_object()) throw CheckpointError(file.string() + ": not a JSON object (fix: re-save it)");
  Reader r(file, root);
  std::string architecture;
  if (const json* list = r.find("architectures"); list != nullptr && list->is_array() && !list->empty() &&
                                                  (*list)[0].is_string()) {
    architecture = (*list)[0].get<std::string>();
  } else if (const json* type = r.find("model_type"); type != nullptr && type->is_string()) {
    const auto t = type->get<std::string>();
    architecture = t == "gpt2" ? "GPT2LMHeadModel" : t == "llama" ? "LlamaForCausalLM" : "model_type " + t;
  }
  if (architecture == "GPT2LMHeadModel") {
    read_gpt2(r);
  } else if (architecture == "LlamaForCausalLM") {
    read_llama(r);
  } else {
    r.fail(architecture.rfind("model_type", 0) == 0 ? "model_type" : "architectures",
           architecture.empty() ? "neither architectures nor model_type is given"
                                : fmt::format("unsupported architecture '{}'", architecture),
           "ppctl imports GPT2LMHeadModel and LlamaForCausalLM");
  }
  r.out.architecture = architecture;
  return r.out;
}

std::string hf_config_json(const ModelSpec& m) {
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
    out = {{"architectures", {"LlamaForCausalLM"}},
           {"model_type", "llama"},
           {"hidden_size", m.hidden},
           {"intermediate_size", ffn_hidden_of(m)},
           {"num_hidden_layers", m.layers},
           {"num_attention_heads", m.heads},
           {"num_key_value_heads", kv_heads_of(m)},
           {"head_dim", m.hidden / m.heads},
           {"vocab_size", m.vocab_size},
           {"rms_norm_eps", m.norm_eps},
           {"rope_theta", m.rope_theta},
           {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", m.rope_theta}}},
           {"max_position_embeddings", m.seq_len},
           {"hidden_act", "silu"},
           {"attention_bias", false},
           {"mlp_bias", false},
           {"tie_word_embeddings", m.tie_embeddings},
           {"dtype", "float32"}};
  }
  return out.dump(2) + "\n";
}

}  // namespace ppctl::config
