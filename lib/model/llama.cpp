// The Llama block: RMSNorm, rotary embeddings, grouped-query attention and the SwiGLU MLP.
#include "model/llama.hpp"

#include <ATen/CPUGeneratorImpl.h>

namespace ppctl::model {
namespace {

torch::nn::Linear no_bias(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

}  // namespace

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
  const auto fp32 = torch::dtype(torch::kFloat).device(device);
  const auto exponents = torch::arange(0, head_dim, 2, torch::dtype(torch::kLong).device(device)).to(torch::kFloat) /
                         static_cast<double>(head_dim);
  const auto inv_freq = 1.0 / torch::pow(theta, exponents);            // [head_dim / 2]
  const auto positions = torch::arange(seq_len, fp32);                 // [seq_len]
  const auto angles = positions.unsqueeze(1) * inv_freq.unsqueeze(0);  // [seq_len, head_dim / 2]
  const auto both = torch::cat({angles, angles}, -1);
  return {both.cos(), both.sin()};
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const auto half = x.size(-1) / 2;
  const auto rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

LlamaBlockImpl::LlamaBlockImpl(const config::ModelSpec& spec, int64_t layer_index, uint64_t seed)
    : layer_index_(layer_index),
      heads_(spec.heads),
      kv_heads_(config::kv_heads_of(spec)),
      head_dim_(spec.hidden / spec.heads),
      rope_theta_(spec.rope_theta),
      dropout_p_(spec.dropout) {
  const int64_t h = spec.hidden;
  const int64_t f = config::ffn_hidden_of(spec);
  attn_norm_ = register_module("attn_norm", RMSNorm(h, spec.norm_eps));
  q_proj_ = register_module("q_proj", no_bias(h, heads_ * head_dim_));
  k_proj_ = register_module("k_proj", no_bias(h, kv_heads_ * head_dim_));
  v_proj_ = register_module("v_proj", no_bias(h, kv_heads_ * head_dim_));
  o_proj_ = register_module("o_proj", no_bias(heads_ * head_dim_, h));
  mlp_norm_ = register_module("mlp_norm", RMSNorm(h, spec.norm_eps));
  gate_proj_ = register_module("gate_proj", no_bias(h, f));
  up_proj_ = register_module("up_proj", no_bias(h, f));
  down_proj_ = register_module("down_proj", no_bias(f, h));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed(seed, layer_index));
  const double residual_std = residual_init_std(spec.layers);
  for (auto* linear : {&q_proj_, &k_proj_, &v_proj_}) init_linear(*linear, gen, kInitStd);
  init_linear(o_proj_, gen, residual_std);
  for (auto* linear : {&gate_proj_, &up_proj_}) init_linear(*linear, gen, kInitStd);
  init_linear(down_proj_, gen, residual_std);
}

torch::Tensor LlamaBlockImpl::forward(const torch::Tensor& x, const DropoutContext& dropout) {
  const auto batch = x.size(0), seq = x.size(1);
  const auto normed = attn_norm_->forward(x);
  auto split_heads = [&](const torch::Tensor& t, int64_t heads) {
    return t.view({batch, seq, heads, head_dim_}).transpose(1, 2);
  };
  const auto [cos, sin] = rotary_tables(seq, head_dim_, rope_theta_, x.device());
  auto q = apply_rotary(split_heads(q_proj_->forward(normed), heads_), cos, sin);
  auto k = apply_rotary(split_heads(k_proj_->forward(normed), kv_heads_), cos, sin);
  auto v = split_heads(v_proj_->forward(normed), kv_heads_);
  if (kv_heads_ < heads_) {  // query head j reads key/value head j / (heads / kv_heads)
    k = k.repeat_interleave(heads_ / kv_heads_, 1);
    v = v.repeat_interleave(heads_ / kv_heads_, 1);
  }
  auto attn = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
  attn = attn.transpose(1, 2).reshape({batch, seq, heads_ * head_dim_});
  const auto h = x + seeded_dropout(o_proj_->forward(attn), dropout_p_, dropout, layer_index_, 0);
  const auto m = mlp_norm_->forward(h);
  const auto mlp = down_proj_->forward(torch::silu(gate_proj_->forward(m)) * up_proj_->forward(m));
  return h + seeded_dropout(mlp, dropout_p_, dropout, layer_index_, 1);
}

}  // namespace ppctl::model
