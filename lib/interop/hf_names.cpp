// Hugging Face <-> ppctl names and layouts for GPT-2 and the Llama family, per stage.
#include "interop/hf_names.hpp"

#include <fmt/format.h>

namespace ppctl::interop {
namespace {

using Shape = std::vector<int64_t>;

/// Adds entries to a list, spelling each HF name with and without the base model's prefix.
struct Builder {
  std::string prefix;  ///< `transformer.` (GPT-2) or `model.` (Llama)
  std::vector<HfTensor> out;

  void add(std::string ppctl, Shape ppctl_shape, const std::string& hf, Layout layout = Layout::Same) {
    Shape hf_shape = ppctl_shape;
    if (layout == Layout::Transpose) std::swap(hf_shape[0], hf_shape[1]);
    out.push_back({std::move(ppctl), std::move(ppctl_shape), {prefix + hf, hf}, std::move(hf_shape), layout, false});
  }

  /// The head's weight: HF's lm_head.weight (no prefix); the last stage's tied copy falls back to the
  /// embedding, which is all HF saves for a tied model.
  void head(const Shape& shape, bool tied_copy, const std::string& embedding) {
    HfTensor t{"lm_head.weight", shape, {"lm_head.weight"}, shape, Layout::Same, tied_copy};
    if (tied_copy) {
      t.hf_names.push_back(prefix + embedding);
      t.hf_names.push_back(embedding);
    }
    out.push_back(std::move(t));
  }
};

std::vector<HfTensor> gpt2_tensors(const config::ModelSpec& m, const plan::StageLayout& s) {
  const int64_t h = m.hidden, f = config::ffn_hidden_of(m);
  Builder b{"transformer.", {}};
  if (s.has_embedding) {
    b.add("tok_embed.weight", {m.vocab_size, h}, "wte.weight");
    b.add("pos_embed.weight", {m.seq_len, h}, "wpe.weight", Layout::Rows);
  }
  for (int64_t i = s.layers.begin; i < s.layers.end; ++i) {
    const auto p = fmt::format("block{}.", i);
    const auto q = fmt::format("h.{}.", i);
    b.add(p + "ln1.weight", {h}, q + "ln_1.weight");
    b.add(p + "ln1.bias", {h}, q + "ln_1.bias");
    b.add(p + "qkv.weight", {3 * h, h}, q + "attn.c_attn.weight", Layout::Transpose);
    b.add(p + "qkv.bias", {3 * h}, q + "attn.c_attn.bias");
    b.add(p + "proj.weight", {h, h}, q + "attn.c_proj.weight", Layout::Transpose);
    b.add(p + "proj.bias", {h}, q + "attn.c_proj.bias");
    b.add(p + "ln2.weight", {h}, q + "ln_2.weight");
    b.add(p + "ln2.bias", {h}, q + "ln_2.bias");
    b.add(p + "fc1.weight", {f, h}, q + "mlp.c_fc.weight", Layout::Transpose);
    b.add(p + "fc1.bias", {f}, q + "mlp.c_fc.bias");
    b.add(p + "fc2.weight", {h, f}, q + "mlp.c_proj.weight", Layout::Transpose);
    b.add(p + "fc2.bias", {h}, q + "mlp.c_proj.bias");
  }
  if (s.has_head) {
    b.add("ln_f.weight", {h}, "ln_f.weight");
    b.add("ln_f.bias", {h}, "ln_f.bias");
    if (!(m.tie_embeddings && s.has_embedding)) b.head({m.vocab_size, h}, m.tie_embeddings, "wte.weight");
  }
  return b.out;
}

/// The llama family (llama, qwen2, qwen3, mistral share transformers' names): qwen2's q/k/v biases
/// follow each weight, qwen3's q_norm and k_norm follow o_proj, as ppctl registers them.
std::vector<HfTensor> llama_tensors(const config::ModelSpec& m, const plan::StageLayout& s) {
  const int64_t h = m.hidden, f = config::ffn_hidden_of(m), d = config::head_dim_of(m);
  const int64_t q_width = m.heads * d, kv = config::kv_heads_of(m) * d;
  const bool bias = m.arch == config::Arch::Qwen2;
  Builder b{"model.", {}};
  if (s.has_embedding) b.add("tok_embed.weight", {m.vocab_size, h}, "embed_tokens.weight");
  for (int64_t i = s.layers.begin; i < s.layers.end; ++i) {
    const auto p = fmt::format("block{}.", i);
    const auto q = fmt::format("layers.{}.", i);
    b.add(p + "attn_norm.weight", {h}, q + "input_layernorm.weight");
    for (const auto& [name, rows] : {std::pair<const char*, int64_t>{"q_proj", q_width}, {"k_proj", kv}, {"v_proj", kv}}) {
      b.add(p + name + ".weight", {rows, h}, q + "self_attn." + name + ".weight");
      if (bias) b.add(p + name + ".bias", {rows}, q + "self_attn." + name + ".bias");
    }
    b.add(p + "o_proj.weight", {h, q_width}, q + "self_attn.o_proj.weight");
    if (m.arch == config::Arch::Qwen3) {
      b.add(p + "q_norm.weight", {d}, q + "self_attn.q_norm.weight");
      b.add(p + "k_norm.weight", {d}, q + "self_attn.k_norm.weight");
    }
    b.add(p + "mlp_norm.weight", {h}, q + "post_attention_layernorm.weight");
    b.add(p + "gate_proj.weight", {f, h}, q + "mlp.gate_proj.weight");
    b.add(p + "up_proj.weight", {f, h}, q + "mlp.up_proj.weight");
    b.add(p + "down_proj.weight", {h, f}, q + "mlp.down_proj.weight");
  }
  if (s.has_head) {
    b.add("ln_f.weight", {h}, "norm.weight");
    if (!(m.tie_embeddings && s.has_embedding)) {
      b.head({m.vocab_size, h}, m.tie_embeddings, "embed_tokens.weight");
    }
  }
  return b.out;
}

}  // namespace

std::vector<HfTensor> hf_tensors(const config::ModelSpec& model, const plan::StageLayout& layout) {
  return config::llama_family(model.arch) ? llama_tensors(model, layout) : gpt2_tensors(model, layout);
}

std::vector<HfTensor> hf_tensors(const config::ModelSpec& model) {
  plan::StageLayout whole;
  whole.layers = {0, model.layers};
  whole.has_embedding = true;
  whole.has_head = true;
  return hf_tensors(model, whole);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace ppctl::interop
