// The Llama block (Touvron et al., arXiv 2302.13971): RMSNorm (Zhang & Sennrich, arXiv 1910.07467),
// rotary position embeddings (Su et al., arXiv 2104.09864), grouped-query attention (Ainslie et al.,
// arXiv 2305.13245) and a SwiGLU MLP (Shazeer, arXiv 2002.05202), no biases. Names, layouts and
// numerics follow Hugging Face transformers' LlamaForCausalLM (modeling_llama.py), so its weights map
// 1:1 (docs/interfaces: block<i>.{attn_norm,q_proj,k_proj,v_proj,o_proj,mlp_norm,gate_proj,up_proj,
// down_proj}.weight).
#pragma once

#include <utility>

#include "config/job_spec.hpp"
#include "model/block.hpp"

namespace ppctl::model {

/// RMSNorm as HF LlamaRMSNorm: y = weight * (x32 * rsqrt(mean(x32^2, last dim) + eps)).to(x.dtype),
/// x32 = x in fp32. Parameter `weight` [dim], initialised to ones. Where a tensor-parallel rank's norm sees only
/// part of the data (this rank's positions under sequence parallelism; qwen3's per-head q_norm and k_norm over this
/// rank's heads) its gradient is a partial sum, which the trainer sums over the group once per step
/// (model::gradient_is_partial).
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

/// Rotary tables (cos, sin) of default RoPE, each [seq_len, head_dim] fp32 on `device`
/// (model/rope.hpp's rotary_tables with no scaling): inv_freq_j = theta^(-2j / head_dim) for j <
/// head_dim / 2, angle[t, j] = t x inv_freq_j, both halves of the last dimension repeating the angles.
/// head_dim even.
std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t seq_len, int64_t head_dim, double theta,
                                                      const torch::Device& device);

/// x [batch, heads, seq_len, head_dim] rotated: x cos + rotate_half(x) sin, rotate_half(x) =
/// cat(-x[..., d/2:], x[..., :d/2]) (HF apply_rotary_pos_emb). Promotes to fp32 like HF does.
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

/// One Llama block: h = x + o_proj(attn(rope(q), rope(k), v)) of attn_norm(x), then h + down_proj(
/// silu(gate_proj(m)) * up_proj(m)) with m = mlp_norm(h). q has `heads` heads, k and v
/// config::kv_heads_of(spec) heads, each serving heads / kv_heads consecutive query heads (HF
/// repeat_kv); each head config::head_dim_of(spec) wide; causal scaled-dot-product attention (scale
/// 1/sqrt(head_dim)); RoPE scaled by spec.rope_scaling (model/rope.hpp). The llama family's variants:
/// qwen2 gives q_proj, k_proj and v_proj biases (Qwen2Attention); qwen3 normalises each head's q and k
/// with RMSNorms q_norm and k_norm [head_dim] before the rotation (Qwen3Attention).
/// Initialised from init_seed(seed, layer_index): norms 1, biases 0, q, k, v, gate, up N(0, 0.02),
/// o_proj and down_proj residual_init_std, drawn in the order q, k, v, o, gate, up, down. Dropout sites:
/// 0 after attention, 1 after the MLP (as gpt2).
/// Over `tp` (t ranks, Megatron-LM's split): q_proj, k_proj, v_proj column-parallel by heads (heads / t query
/// and kv_heads / t key/value heads per rank, so each rank's query heads read its own key/value heads),
/// o_proj row-parallel; gate_proj and up_proj column-parallel, down_proj row-parallel; attn_norm and
/// mlp_norm replicated. With sequence parallelism, as gpt2's block: x and the output [batch, seq / t, hidden].
class LlamaBlockImpl : public DecoderBlock {
 public:
  LlamaBlockImpl(const config::ModelSpec& spec, int64_t layer_index, uint64_t seed, const TensorParallel& tp = {});
  torch::Tensor forward(const torch::Tensor& x, const MicrobatchContext& context) override;

 private:
  int64_t layer_index_;
  int64_t heads_, kv_heads_, head_dim_;  ///< this rank's heads and kv_heads (model's / t)
  TensorParallel tp_;
  config::ModelSpec rope_;  ///< the fields model/rope.hpp reads: head_dim, rope_theta, rope_scaling
  double dropout_p_;
  RMSNorm attn_norm_{nullptr}, mlp_norm_{nullptr};
  RMSNorm q_norm_{nullptr}, k_norm_{nullptr};  ///< qwen3 only
  ParallelLinear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, o_proj_{nullptr};
  ParallelLinear gate_proj_{nullptr}, up_proj_{nullptr}, down_proj_{nullptr};
};

}  // namespace ppctl::model
