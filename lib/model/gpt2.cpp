// The GPT-2 block: construction, layer-seeded initialisation and forward.
#include "model/gpt2.hpp"

#include <ATen/CPUGeneratorImpl.h>

namespace ppctl::model {

Gpt2LayerNormImpl::Gpt2LayerNormImpl(int64_t hidden, double eps) : hidden_(hidden), eps_(eps) {
  weight = register_parameter("weight", torch::ones({hidden}));
  bias = register_parameter("bias", torch::zeros({hidden}));
}

torch::Tensor Gpt2LayerNormImpl::forward(const torch::Tensor& x) {
  const auto type = x.scalar_type();  // a no-op unless the weights are bf16 and x is not
  return torch::layer_norm(x, {hidden_}, weight.to(type), bias.to(type), eps_);
}

Gpt2LayerNorm gpt2_layer_norm(const config::ModelSpec& spec) { return Gpt2LayerNorm(spec.hidden, spec.norm_eps); }

Gpt2BlockImpl::Gpt2BlockImpl(const config::ModelSpec& spec, int64_t layer_index, uint64_t seed,
                             const TensorParallel& tp)
    : layer_index_(layer_index),
      heads_(spec.heads / tp.size),
      head_dim_(spec.hidden / spec.heads),
      dropout_p_(spec.dropout),
      gelu_tanh_(spec.activation == config::Activation::GeluTanh),
      tp_(tp) {
  const int64_t h = spec.hidden;
  const int64_t f = config::ffn_hidden_of(spec);
  ln1_ = register_module("ln1", gpt2_layer_norm(spec));
  qkv_ = register_module("qkv", make_linear(h, 3 * h, true, ParallelStyle::Column, tp, 3));
  proj_ = register_module("proj", make_linear(h, h, true, ParallelStyle::Row, tp));
  ln2_ = register_module("ln2", gpt2_layer_norm(spec));
  fc1_ = register_module("fc1", make_linear(h, f, true, ParallelStyle::Column, tp));
  fc2_ = register_module("fc2", make_linear(f, h, true, ParallelStyle::Row, tp));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed(seed, layer_index));
  const double residual_std = residual_init_std(spec.layers);
  init_linear(qkv_, gen, kInitStd);
  init_linear(proj_, gen, residual_std);
  init_linear(fc1_, gen, kInitStd);
  init_linear(fc2_, gen, residual_std);
}

torch::Tensor Gpt2BlockImpl::forward(const torch::Tensor& x, const MicrobatchContext& context) {
  const auto& dropout = context.dropout;
  const auto normed = enter_tensor_parallel(ln1_->forward(x), tp_);  // the whole sequence from here
  const auto batch = normed.size(0), seq = normed.size(1);
  const auto width = heads_ * head_dim_;  // this rank's heads
  auto qkv = qkv_->forward(normed).chunk(3, -1);
  auto split_heads = [&](const torch::Tensor& t) {
    return t.view({batch, seq, heads_, head_dim_}).transpose(1, 2);
  };
  auto attn = attention(split_heads(qkv[0]), split_heads(qkv[1]), split_heads(qkv[2]), context);
  attn = attn.transpose(1, 2).reshape({batch, seq, width});
  auto h = x + seeded_dropout(proj_->forward(attn), dropout_p_, dropout, layer_index_, 0, tp_);
  auto inner = fc1_->forward(enter_tensor_parallel(ln2_->forward(h), tp_));
  auto mlp = fc2_->forward(gelu_tanh_ ? torch::gelu(inner, "tanh") : torch::gelu(inner));
  return h + seeded_dropout(mlp, dropout_p_, dropout, layer_index_, 1, tp_);
}

}  // namespace ppctl::model
