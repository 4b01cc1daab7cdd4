// Partition-independent seeds, the shared initialisation helpers, seeded dropout and the attention of decoder blocks
// (causal, or block-diagonal causal for packed conversations).
#include "model/block.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace ppctl::model {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix64 finaliser over h ^ v: a fixed, well-mixed hash.
  uint64_t z = h ^ (v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t init_seed(uint64_t seed, int64_t part) { return mix(seed, static_cast<uint64_t>(part + 2)); }

double residual_init_std(int64_t layers) { return kInitStd / std::sqrt(2.0 * static_cast<double>(layers)); }

ParallelLinear make_linear(int64_t in, int64_t out, bool bias, ParallelStyle style, const TensorParallel& tp,
                           int64_t parts) {
  return ParallelLinear(in, out, bias, style, tp, parts);
}

void init_linear(ParallelLinear& linear, at::Generator& gen, double std) { linear->init_normal(gen, std); }

torch::Tensor seeded_dropout(const torch::Tensor& x, double p, const DropoutContext& ctx, int64_t layer,
                             int64_t site, const TensorParallel& tp) {
  if (!ctx.training || p <= 0.0) return x;
  uint64_t key = mix(mix(mix(mix(ctx.seed, static_cast<uint64_t>(ctx.step)),
                             static_cast<uint64_t>(ctx.microbatch)),
                         static_cast<uint64_t>(layer + 3)),
                     static_cast<uint64_t>(site));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(key);
  auto sizes = x.sizes().vec();
  if (tp.splits_sequence()) sizes.at(1) *= tp.size;  // the whole sequence's mask, then this rank's positions
  auto keep = torch::empty(sizes, torch::dtype(torch::kFloat)).bernoulli_(1.0 - p, gen);
  // A copy of this rank's positions: a view (or, at batch 1, a contiguous narrow) would keep the whole sequence's
  // mask alive for the backward, which saves the mask.
  if (tp.splits_sequence()) keep = keep.narrow(1, tp.rank * x.size(1), x.size(1)).clone();
  return x * keep.to(x.device(), x.scalar_type()) / (1.0 - p);
}

torch::Tensor block_causal_mask(const torch::Tensor& documents) {
  const int64_t seq = documents.size(1);
  const auto same = documents.unsqueeze(2) == documents.unsqueeze(1);  // [batch, query, key]
  const auto causal = torch::ones({seq, seq}, torch::dtype(torch::kBool).device(documents.device())).tril();
  return (same & causal).unsqueeze(1);
}

std::pair<torch::Tensor, int64_t> segment_offsets(const torch::Tensor& documents) {
  const auto docs = documents.to(torch::kCPU, torch::kLong).contiguous();
  const int64_t rows = docs.size(0), seq = docs.size(1);
  const auto* d = docs.data_ptr<int64_t>();
  std::vector<int32_t> offsets{0};
  int64_t longest = 0, start = 0;
  for (int64_t i = 0; i < rows * seq; ++i) {
    const bool ends = (i + 1) % seq == 0 || d[i + 1] != d[i];
    if (!ends) continue;
    offsets.push_back(static_cast<int32_t>(i + 1));
    longest = std::max(longest, i + 1 - start);
    start = i + 1;
  }
  return {torch::tensor(offsets, torch::kInt), longest};
}

torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const MicrobatchContext& context) {
  if (context.cu_seqlens.defined()) {  // [batch, heads, seq, d] -> the rows end to end: [batch x seq, heads, d]
    const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), dim = q.size(3);
    const auto flat = [&](const torch::Tensor& t) {
      return t.transpose(1, 2).reshape({batch * seq, heads, dim}).to(torch::kBFloat16);
    };
    auto out = std::get<0>(at::_flash_attention_forward(flat(q), flat(k), flat(v), context.cu_seqlens,
                                                        context.cu_seqlens, context.max_seqlen, context.max_seqlen,
                                                        /*dropout_p=*/0.0, /*is_causal=*/true,
                                                        /*return_debug_mask=*/false));
    return out.view({batch, seq, heads, dim}).transpose(1, 2);
  }
  if (!context.attention_mask.defined()) {
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
  }
  return at::scaled_dot_product_attention(q, k, v, context.attention_mask, /*dropout_p=*/0.0, /*is_causal=*/false);
}

}  // namespace ppctl::model
