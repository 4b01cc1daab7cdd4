// The Llama block: RMSNorm, rotary embeddings, grouped-query attention and the SwiGLU MLP.
#include "model/llama.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include "model/rope.hpp"

namespace ppctl::model {

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  const auto dtype = x.scalar_type();
  const auto x32 = x.to(torch::kFloat);
  const auto variance = x32.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (x32 * torch::rsqrt(variance + eps_)).to(dtype);
}

std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t seq_len, int64_t head_dim, double theta,
                                                      const torch::Device& device) {
  return rotary_tables(seq_len, rope_inverse_frequencies(head_dim, theta, {}, device), 1.0);
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const auto half = x.size(-1) / 2;
  const auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

LlamaBlockImpl::LlamaBlockImpl(const config::ModelSpec& spec, int64_t layer_index, uint64_t seed,
                               const TensorParallel& tp)
    : layer_index_(layer_index),
      heads_(spec.heads / tp.size),
      kv_heads_(config::kv_heads_of(spec) / tp.size),
      head_dim_(config::head_dim_of(spec)),
      tp_(tp),
      rope_(spec),
      dropout_p_(spec.dropout) {
  const int64_t h = spec.hidden;
  const int64_t f = config::ffn_hidden_of(spec);
  const int64_t q_width = spec.heads * head_dim_, kv_width = config::kv_heads_of(spec) * head_dim_;
  const bool qkv_bias = spec.arch == config::Arch::Qwen2;
  const auto column = ParallelStyle::Column, row = ParallelStyle::Row;
  attn_norm_ = register_module("attn_norm", RMSNorm(h, spec.norm_eps));
  q_proj_ = register_module("q_proj", make_linear(h, q_width, qkv_bias, column, tp));
  k_proj_ = register_module("k_proj", make_linear(h, kv_width, qkv_bias, column, tp));
  v_proj_ = register_module("v_proj", make_linear(h, kv_width, qkv_bias, column, tp));
  o_proj_ = register_module("o_proj", make_linear(q_width, h, false, row, tp));
  if (spec.arch == config::Arch::Qwen3) {
    q_norm_ = register_module("q_norm", RMSNorm(head_dim_, spec.norm_eps));
    k_norm_ = register_module("k_norm", RMSNorm(head_dim_, spec.norm_eps));
  }
  mlp_norm_ = register_module("mlp_norm", RMSNorm(h, spec.norm_eps));
  gate_proj_ = register_module("gate_proj", make_linear(h, f, false, column, tp));
  up_proj_ = register_module("up_proj", make_linear(h, f, false, column, tp));
  down_proj_ = register_module("down_proj", make_linear(f, h, false, row, tp));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed(seed, layer_index));
  const double residual_std = residual_init_std(spec.layers);
  for (auto* proj : {&q_proj_, &k_proj_, &v_proj_}) init_linear(*proj, gen, kInitStd);
  init_linear(o_proj_, gen, residual_std);
  for (auto* proj : {&gate_proj_, &up_proj_}) init_linear(*proj, gen, kInitStd);
  init_linear(down_proj_, gen, residual_std);
}

torch::Tensor LlamaBlockImpl::forward(const torch::Tensor& x, const MicrobatchContext& context) {
  const auto& dropout = context.dropout;
  const auto normed = enter_tensor_parallel(attn_norm_->forward(x), tp_);  // once for q, k and v; whole sequence
  const auto batch = normed.size(0), seq = normed.size(1);
  // [batch, seq, heads, head_dim] -> [batch, heads, seq, head_dim], qwen3's per-head norm before the turn
  auto split_heads = [&](const torch::Tensor& t, int64_t heads, RMSNorm& norm) {
    const auto per_head = t.view({batch, seq, heads, head_dim_});
    return (norm ? norm->forward(per_head) : per_head).transpose(1, 2);
  };
  // The stage's tables for this microbatch (its positions), else the plain positions' tables computed here.
  const auto [cos, sin] = context.rope_cos.defined() ? std::pair{context.rope_cos, context.rope_sin}
                                                     : rotary_tables(seq, rope_, x.device());
  auto q = apply_rotary(split_heads(q_proj_->forward(normed), heads_, q_norm_), cos, sin);
  auto k = apply_rotary(split_heads(k_proj_->forward(normed), kv_heads_, k_norm_), cos, sin);
  RMSNorm none{nullptr};
  auto v = split_heads(v_proj_->forward(normed), kv_heads_, none);
  if (kv_heads_ < heads_) {  // query head j reads key/value head j / (heads / kv_heads)
    k = k.repeat_interleave(heads_ / kv_heads_, 1);
    v = v.repeat_interleave(heads_ / kv_heads_, 1);
  }
  auto attn = attention(q, k, v, context);
  attn = attn.transpose(1, 2).reshape({batch, seq, heads_ * head_dim_});
  const auto h = x + seeded_dropout(o_proj_->forward(attn), dropout_p_, dropout, layer_index_, 0, tp_);
  const auto m = enter_tensor_parallel(mlp_norm_->forward(h), tp_);  // once for gate and up
  const auto mlp = down_proj_->forward(torch::silu(gate_proj_->forward(m)) * up_proj_->forward(m));
  return h + seeded_dropout(mlp, dropout_p_, dropout, layer_index_, 1, tp_);
}

}  // namespace ppctl::model
