// Rotary position embeddings (Su et al., arXiv 2104.09864) and their context-extension scalings: the
// inverse frequencies and attention factor of transformers' modeling_rope_utils.py (default, linear,
// llama3, yarn), computed with the same operations in the same precision, and the cos / sin tables.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>

#include "config/job_spec.hpp"

namespace ppctl::model {

/// The inverse frequencies [head_dim / 2], fp32 on `device`, of RoPE with base `theta` scaled by
/// `scaling`, as transformers 5's ROPE_INIT_FUNCTIONS compute them (modeling_rope_utils.py):
///   default: inv_freq_j = 1 / theta^(2j / head_dim);
///   linear (_compute_linear_scaling_rope_parameters): inv_freq / factor;
///   llama3 (_compute_llama3_parameters): wavelengths 2 pi / inv_freq above original /
///     low_freq_factor divided by factor, below original / high_freq_factor kept, those between blended
///     by (original / wavelength - low) / (high - low);
///   yarn (_compute_yarn_parameters; Peng et al., arXiv 2309.00071 §3.2): the interpolated inv_freq /
///     factor and the original blended by a linear ramp between the correction dimensions of beta_fast and
///     beta_slow rotations over original_max_position_embeddings (floored / ceiled when truncate).
/// head_dim even and > 0; `scaling` checked by config/rope_scaling.hpp.
torch::Tensor rope_inverse_frequencies(int64_t head_dim, double theta, const config::RopeScaling& scaling,
                                       const torch::Device& device);

/// The factor transformers multiplies cos and sin by (its attention_scaling): 1 except for yarn, where
/// it is attention_factor when given, else get_mscale(factor, mscale) / get_mscale(factor,
/// mscale_all_dim) when both are given, else get_mscale(factor) = 0.1 ln(factor) + 1 (1 for factor <= 1).
double rope_attention_factor(const config::RopeScaling& scaling);

/// Rotary tables (cos, sin), each [seq_len, 2 x inv_freq.size(0)] fp32 on inv_freq's device, in
/// transformers' convention: angle[t, j] = t x inv_freq_j for positions t = 0 .. seq_len - 1, both halves
/// of the last dimension repeating the angles, each table multiplied by `attention_factor`.
std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t seq_len, const torch::Tensor& inv_freq,
                                                      double attention_factor);

/// The tables of `model` (llama family): rope_inverse_frequencies over config::head_dim_of(model),
/// model.rope_theta and model.rope_scaling, scaled by rope_attention_factor.
std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t seq_len, const config::ModelSpec& model,
                                                      const torch::Device& device);

}  // namespace ppctl::model
