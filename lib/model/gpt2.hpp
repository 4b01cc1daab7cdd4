// The GPT-2 block (Radford et al. 2019): pre-norm LayerNorms, fused QKV multi-head causal attention,
// a GELU MLP (exact or tanh-approximated), biases everywhere. Positions are learned (model/stage.cpp).
#pragma once

#include "config/job_spec.hpp"
#include "model/block.hpp"

namespace ppctl::model {

/// GPT-2's LayerNorm over the last dimension `hidden` with epsilon model.norm_eps: parameters `weight`
/// (1) and `bias` (0) of [hidden]. forward(x [..., hidden]) -> the same shape and type as x. Its weight
/// and bias are taken in x's type: with bf16 weights (runtime.precision bf16-params) and an fp32
/// residual stream the norm runs in fp32, as autocast's fp32 policy for layer_norm does on CUDA
/// (CPU's autocast has no such rule, and its layer_norm refuses fp32 inputs with bf16 weights).
/// Under sequence parallelism it sees this rank's positions only: its gradients are then partial sums, which the
/// trainer sums over the tensor-parallel group once per step (model::gradient_is_partial).
class Gpt2LayerNormImpl : public torch::nn::Module {
 public:
  Gpt2LayerNormImpl(int64_t hidden, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;

 private:
  int64_t hidden_;
  double eps_;
};
TORCH_MODULE(Gpt2LayerNorm);

/// One GPT-2 block: x + attn(ln1(x)), then + mlp(ln2(x)), mlp = fc2(gelu(fc1(.))) of width
/// config::ffn_hidden_of(spec); causal self-attention via at::scaled_dot_product_attention.
/// Parameters `ln1`, `qkv` [3h, h] (q | k | v rows), `proj`, `ln2`, `fc1`, `fc2` (weights and biases).
/// Initialised from init_seed(seed, layer_index): N(0, 0.02) weights, zero biases, residual_init_std
/// for proj and fc2, drawn in that order. Dropout sites: 0 after attention, 1 after the MLP.
/// Over `tp` (t ranks, Megatron-LM's split, arXiv 1909.08053 §3): qkv column-parallel by heads (heads / t
/// of each of q, k and v), proj row-parallel, fc1 column-parallel, fc2 row-parallel; the norms and the
/// residual stream replicated; one all-reduce after attention and one after the MLP forward, one before
/// each backward. With sequence parallelism (tp.sequence_parallel) x and the output are this rank's
/// [batch, seq / t, hidden]: the norms and dropout work on it, and an all-gather enters and a reduce-scatter
/// leaves each tensor-parallel region instead (arXiv 2205.05198 §4.2.2).
class Gpt2BlockImpl : public DecoderBlock {
 public:
  Gpt2BlockImpl(const config::ModelSpec& spec, int64_t layer_index, uint64_t seed, const TensorParallel& tp = {});
  torch::Tensor forward(const torch::Tensor& x, const MicrobatchContext& context) override;

 private:
  int64_t layer_index_;
  int64_t heads_;  ///< this rank's: model.heads / t
  int64_t head_dim_;
  double dropout_p_;
  bool gelu_tanh_;
  TensorParallel tp_;
  Gpt2LayerNorm ln1_{nullptr}, ln2_{nullptr};
  ParallelLinear qkv_{nullptr}, proj_{nullptr}, fc1_{nullptr}, fc2_{nullptr};
};

/// GPT-2's LayerNorm of model.hidden with epsilon model.norm_eps (weight 1, bias 0).
Gpt2LayerNorm gpt2_layer_norm(const config::ModelSpec& spec);

}  // namespace ppctl::model
