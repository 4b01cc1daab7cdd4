// RoPE's inverse frequencies under each scaling, as transformers' modeling_rope_utils.py, and the tables.
#include "model/rope.hpp"

#include <algorithm>
#include <cmath>

namespace ppctl::model {
namespace {

/// 0.1 x mscale x ln(scale) + 1, or 1 for scale <= 1 (get_mscale in _compute_yarn_parameters).
double yarn_mscale(double scale, double mscale) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

/// The dimension at which a frequency turns `rotations` times over `context` positions
/// (find_correction_dim).
double correction_dim(double rotations, int64_t dim, double base, double context) {
  return static_cast<double>(dim) * std::log(context / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
}

torch::Tensor yarn_inverse_frequencies(int64_t dim, double base, const config::RopeScaling& s,
                                       const torch::Device& device) {
  const auto fp32 = torch::dtype(torch::kFloat).device(device);
  const auto pos_freqs = torch::pow(base, torch::arange(0, dim, 2, fp32) / static_cast<double>(dim));
  const auto extrapolation = 1.0 / pos_freqs;
  const auto interpolation = 1.0 / (s.factor * pos_freqs);
  const double context = static_cast<double>(s.original_max_position_embeddings);
  double low = correction_dim(s.beta_fast, dim, base, context);
  double high = correction_dim(s.beta_slow, dim, base, context);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // linear_ramp_factor's guard against a zero-width ramp
  const auto ramp = ((torch::arange(dim / 2, torch::kFloat) - low) / (high - low)).clamp(0, 1).to(device);
  const auto extrapolation_factor = 1 - ramp;
  return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
}

torch::Tensor llama3_inverse_frequencies(const torch::Tensor& inv_freq, const config::RopeScaling& s) {
  const double context = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = context / s.low_freq_factor;
  const double high_freq_wavelen = context / s.high_freq_factor;
  const auto wavelen = 2 * M_PI / inv_freq;
  auto scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  const auto smooth = (context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  const auto medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return torch::where(medium, smoothed, scaled);
}

}  // namespace

torch::Tensor rope_inverse_frequencies(int64_t head_dim, double theta, const config::RopeScaling& scaling,
                                       const torch::Device& device) {
  if (scaling.rope_type == config::RopeType::Yarn) return yarn_inverse_frequencies(head_dim, theta, scaling, device);
  const auto exponents = torch::arange(0, head_dim, 2, torch::dtype(torch::kLong).device(device)).to(torch::kFloat) /
                         static_cast<double>(head_dim);
  const auto inv_freq = 1.0 / torch::pow(theta, exponents);
  switch (scaling.rope_type) {
    case config::RopeType::Linear: return inv_freq / scaling.factor;
    case config::RopeType::Llama3: return llama3_inverse_frequencies(inv_freq, scaling);
    default: return inv_freq;
  }
}

double rope_attention_factor(const config::RopeScaling& s) {
  if (s.rope_type != config::RopeType::Yarn) return 1.0;
  if (s.attention_factor > 0) return s.attention_factor;
  if (s.mscale != 0 && s.mscale_all_dim != 0) return yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim);
  return yarn_mscale(s.factor, 1.0);
}

std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t seq_len, const torch::Tensor& inv_freq,
                                                      double attention_factor) {
  const auto positions = torch::arange(seq_len, torch::dtype(torch::kFloat).device(inv_freq.device()));
  const auto angles = positions.unsqueeze(1) * inv_freq.unsqueeze(0);  // [seq_len, head_dim / 2]
  const auto both = torch::cat({angles, angles}, -1);
  if (attention_factor == 1.0) return {both.cos(), both.sin()};
  return {both.cos() * attention_factor, both.sin() * attention_factor};
}

std::pair<torch::Tensor, torch::Tensor> rotary_tables(int64_t seq_len, const config::ModelSpec& model,
                                                      const torch::Device& device) {
  const auto inv_freq =
      rope_inverse_frequencies(config::head_dim_of(model), model.rope_theta, model.rope_scaling, device);
  return rotary_tables(seq_len, inv_freq, rope_attention_factor(model.rope_scaling));
}

}  // namespace ppctl::model
