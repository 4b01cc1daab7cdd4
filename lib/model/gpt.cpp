// GPT blocks and pipeline stage modules: construction, partition-independent initialisation,
// seeded dropout, forward and loss.
#include "model/gpt.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <cmath>

#include "core/check.hpp"
#include "model/autocast.hpp"

namespace ppctl::model {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix64 finaliser over h ^ v: a fixed, well-mixed hash.
  uint64_t z = h ^ (v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

constexpr double kInitStd = 0.02;

/// GPT-2 initialisation: N(0, 0.02) weights, zero biases; residual output projections scaled by
/// 1/sqrt(2 L) (GPT-2 paper §2.3). Draws in registration order from one generator.
void init_linear(torch::nn::Linear& linear, at::Generator& gen, double std) {
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std, gen);
  if (linear->bias.defined()) linear->bias.zero_();
}

/// Dropout whose mask comes from a generator keyed by (context, layer, site) — not from the global
/// RNG — so that every partition of the model draws the same masks.
torch::Tensor seeded_dropout(const torch::Tensor& x, double p, const DropoutContext& ctx,
                             int64_t layer, int64_t site) {
  if (!ctx.training || p <= 0.0) return x;
  uint64_t key = mix(mix(mix(mix(ctx.seed, static_cast<uint64_t>(ctx.step)),
                             static_cast<uint64_t>(ctx.microbatch)),
                         static_cast<uint64_t>(layer + 3)),
                     static_cast<uint64_t>(site));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(key);
  auto keep = torch::empty(x.sizes(), torch::dtype(torch::kFloat)).bernoulli_(1.0 - p, gen);
  return x * keep.to(x.device(), x.scalar_type()) / (1.0 - p);
}

}  // namespace

uint64_t init_seed(uint64_t seed, int64_t part) { return mix(seed, static_cast<uint64_t>(part + 2)); }

BlockImpl::BlockImpl(const config::ModelSpec& spec, int64_t layer_index, uint64_t seed)
    : layer_index_(layer_index), heads_(spec.heads), dropout_p_(spec.dropout) {
  const int64_t h = spec.hidden;
  ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
  qkv_ = register_module("qkv", torch::nn::Linear(h, 3 * h));
  proj_ = register_module("proj", torch::nn::Linear(h, h));
  ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
  fc1_ = register_module("fc1", torch::nn::Linear(h, 4 * h));
  fc2_ = register_module("fc2", torch::nn::Linear(4 * h, h));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed(seed, layer_index));
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(spec.layers));
  init_linear(qkv_, gen, kInitStd);
  init_linear(proj_, gen, residual_std);
  init_linear(fc1_, gen, kInitStd);
  init_linear(fc2_, gen, residual_std);
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const DropoutContext& dropout) {
  const auto batch = x.size(0), seq = x.size(1), hidden = x.size(2);
  const auto head_dim = hidden / heads_;
  auto qkv = qkv_->forward(ln1_->forward(x)).chunk(3, -1);
  auto split_heads = [&](const torch::Tensor& t) {
    return t.view({batch, seq, heads_, head_dim}).transpose(1, 2);
  };
  auto attn = at::scaled_dot_product_attention(split_heads(qkv[0]), split_heads(qkv[1]),
                                               split_heads(qkv[2]), /*attn_mask=*/{},
                                               /*dropout_p=*/0.0, /*is_causal=*/true);
  attn = attn.transpose(1, 2).reshape({batch, seq, hidden});
  auto h = x + seeded_dropout(proj_->forward(attn), dropout_p_, dropout, layer_index_, 0);
  auto mlp = fc2_->forward(torch::gelu(fc1_->forward(ln2_->forward(h))));
  return h + seeded_dropout(mlp, dropout_p_, dropout, layer_index_, 1);
}

StageModuleImpl::StageModuleImpl(const config::ModelSpec& spec, const plan::StageLayout& layout,
                                 uint64_t seed)
    : spec_(spec), layout_(layout) {
  torch::NoGradGuard no_grad;
  if (layout.has_embedding) {
    tok_embed_ = register_module("tok_embed", torch::nn::Embedding(spec.vocab_size, spec.hidden));
    pos_embed_ = register_module("pos_embed", torch::nn::Embedding(spec.seq_len, spec.hidden));
    auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed(seed, -1));
    tok_embed_->weight.normal_(0.0, kInitStd, gen);
    pos_embed_->weight.normal_(0.0, kInitStd, gen);
  }
  for (int64_t i = layout.layers.begin; i < layout.layers.end; ++i) {
    blocks_.push_back(register_module(fmt::format("block{}", i), Block(spec, i, seed)));
  }
  if (layout.has_head) {
    ln_f_ = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({spec.hidden})));
    if (!(spec.tie_embeddings && layout.has_embedding)) {  // else the head uses tok_embed's weight
      lm_head_ = register_module(
          "lm_head",
          torch::nn::Linear(torch::nn::LinearOptions(spec.hidden, spec.vocab_size).bias(false)));
      if (spec.tie_embeddings) {
        // The copy of the token embedding: the same generator and first draw as tok_embed.
        auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed(seed, -1));
        lm_head_->weight.normal_(0.0, kInitStd, gen);
      } else {
        auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed(seed, -2));
        init_linear(lm_head_, gen, kInitStd);
      }
    }
  }
}

torch::Tensor StageModuleImpl::forward(const torch::Tensor& input, const DropoutContext& dropout) {
  return forward_parts(input, 0, num_parts(), dropout);
}

int64_t StageModuleImpl::num_parts() const {
  return (layout_.has_embedding ? 1 : 0) + static_cast<int64_t>(blocks_.size()) +
         (layout_.has_head ? 1 : 0);
}

torch::Tensor StageModuleImpl::forward_parts(const torch::Tensor& input, int64_t begin, int64_t end,
                                             const DropoutContext& dropout) {
  PPCTL_ASSERT(0 <= begin && begin <= end && end <= num_parts(),
               fmt::format("parts [{}, {}) of a stage with {}", begin, end, num_parts()));
  const int64_t first_block = layout_.has_embedding ? 1 : 0;
  const auto blocks = static_cast<int64_t>(blocks_.size());
  const bool bf16 = precision_ == config::Precision::Bf16;
  const AutocastGuard autocast(input.device().type(), bf16);
  torch::Tensor x = input;
  for (int64_t part = begin; part < end; ++part) {
    const int64_t block = part - first_block;
    if (block < 0) {
      auto positions = torch::arange(x.size(1), torch::dtype(torch::kLong).device(x.device()));
      x = tok_embed_->forward(x) + pos_embed_->forward(positions).unsqueeze(0);
      x = seeded_dropout(x, spec_.dropout, dropout, -1, 0);
    } else if (block < blocks) {
      x = blocks_[static_cast<size_t>(block)]->forward(x, dropout);
    } else {
      x = ln_f_->forward(x);
      x = lm_head_ ? lm_head_->forward(x) : torch::nn::functional::linear(x, tok_embed_->weight);
      if (bf16) x = x.to(torch::kFloat);  // fp32 logits: the loss and its gradient in fp32
    }
  }
  return x;
}

std::vector<int64_t> StageModuleImpl::segment_starts(int64_t every) const {
  PPCTL_ASSERT(every >= 1, fmt::format("a segment of {} blocks", every));
  const int64_t first_block = layout_.has_embedding ? 1 : 0;
  const auto blocks = static_cast<int64_t>(blocks_.size());
  std::vector<int64_t> starts;
  if (layout_.has_embedding) starts.push_back(0);
  for (int64_t block = 0; block < blocks; block += every) starts.push_back(first_block + block);
  if (layout_.has_head) starts.push_back(first_block + blocks);
  return starts;
}

torch::Tensor StageModuleImpl::loss(const torch::Tensor& logits, const torch::Tensor& targets) const {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                              targets.reshape({-1}));
}

torch::Tensor StageModuleImpl::tied_weight() const {
  if (!spec_.tie_embeddings || (layout_.has_embedding && layout_.has_head)) return {};
  if (layout_.has_embedding) return tok_embed_->weight;
  if (layout_.has_head) return lm_head_->weight;
  return {};
}

plan::StageLayout whole_model_layout(const config::ModelSpec& spec) {
  plan::StageLayout layout;
  layout.layers = {0, spec.layers};
  layout.has_embedding = true;
  layout.has_head = true;
  layout.parameters = plan::embedding_parameters(spec) + spec.layers * plan::block_parameters(spec) +
                      plan::head_parameters(spec) -
                      (spec.tie_embeddings ? spec.vocab_size * spec.hidden : 0);
  return layout;
}

}  // namespace ppctl::model
