// Partition-independent seeds, the shared initialisation helpers and seeded dropout of decoder blocks.
#include "model/block.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

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
  if (tp.splits_sequence()) keep = keep.narrow(1, tp.rank * x.size(1), x.size(1));
  return x * keep.to(x.device(), x.scalar_type()) / (1.0 - p);
}

}  // namespace ppctl::model
