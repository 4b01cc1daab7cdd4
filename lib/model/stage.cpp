// Pipeline stage modules of any architecture: construction, partition-independent initialisation of the
// embedding and head, forward by parts and loss.
#include "model/stage.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include "core/check.hpp"
#include "core/error.hpp"
#include "model/autocast.hpp"
#include "model/gpt2.hpp"
#include "model/llama.hpp"
#include "model/rope.hpp"

namespace ppctl::model {
namespace {

/// Block `layer_index` of model.arch.
std::shared_ptr<DecoderBlock> make_block(const config::ModelSpec& spec, int64_t layer_index, uint64_t seed,
                                         const TensorParallel& tp) {
  switch (spec.arch) {
    case config::Arch::Gpt2: return std::make_shared<Gpt2BlockImpl>(spec, layer_index, seed, tp);
    case config::Arch::Llama:
    case config::Arch::Qwen2:
    case config::Arch::Qwen3:
    case config::Arch::Mistral: return std::make_shared<LlamaBlockImpl>(spec, layer_index, seed, tp);
  }
  throw InternalError("make_block: unknown Arch");
}

/// The final norm of model.arch: LayerNorm (gpt2) or RMSNorm (llama family), epsilon model.norm_eps.
torch::nn::AnyModule make_final_norm(const config::ModelSpec& spec) {
  if (config::llama_family(spec.arch)) return torch::nn::AnyModule(RMSNorm(spec.hidden, spec.norm_eps));
  return torch::nn::AnyModule(gpt2_layer_norm(spec));
}

/// The head's use of the token embedding's weight on a stage holding both ends, under bf16 weights:
/// the identity forward; the backward adds the arriving bf16 gradient straight into the weight's
/// fp32 .grad (the gradient buffer) and passes nothing on. Autograd would otherwise sum the head's
/// and the embedding's gradients in bf16 before accumulating them, while stages that hold a copy each
/// (the pipeline's tied copies) accumulate each use into fp32: this makes both ways one arithmetic.
/// Without an fp32 .grad there is nowhere to add it, and the gradient goes on as usual.
struct AccumulateSeparately : public torch::autograd::Function<AccumulateSeparately> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& weight) {
    ctx->saved_data["weight"] = weight;
    return weight.view_as(weight);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto weight = ctx->saved_data["weight"].toTensor();
    if (!weight.grad().defined() || weight.grad().scalar_type() == grads[0].scalar_type()) return {grads[0]};
    torch::NoGradGuard no_grad;
    weight.mutable_grad().add_(grads[0]);
    return {torch::Tensor()};
  }
};

}  // namespace

StageModuleImpl::StageModuleImpl(const config::ModelSpec& spec, const plan::StageLayout& layout,
                                 uint64_t seed, const TensorParallel& tp)
    : spec_(spec), layout_(layout), tp_(tp) {
  torch::NoGradGuard no_grad;
  if (layout.has_embedding) {
    tok_embed_ = register_module("tok_embed", VocabParallelEmbedding(spec.vocab_size, spec.hidden, tp));
    auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed(seed, -1));
    tok_embed_->init_normal(gen, kInitStd);
    if (spec.arch == config::Arch::Gpt2) {  // learned positions; llama rotates q and k instead
      pos_embed_ = register_module("pos_embed", torch::nn::Embedding(spec.seq_len, spec.hidden));
      pos_embed_->weight.normal_(0.0, kInitStd, gen);
    }
  }
  for (int64_t i = layout.layers.begin; i < layout.layers.end; ++i) {
    blocks_.push_back(register_module(fmt::format("block{}", i), make_block(spec, i, seed, tp)));
  }
  if (config::llama_family(spec.arch) && !blocks_.empty()) {
    auto [cos, sin] = rotary_tables(spec.seq_len, spec, torch::kCPU);
    rope_cos_ = register_buffer("rope_cos", cos);
    rope_sin_ = register_buffer("rope_sin", sin);
  }
  if (layout.has_head) {
    ln_f_ = make_final_norm(spec);
    register_module("ln_f", ln_f_.ptr());
    if (!(spec.tie_embeddings && layout.has_embedding)) {  // else the head uses tok_embed's weight
      lm_head_ = register_module("lm_head", make_linear(spec.hidden, spec.vocab_size, false, ParallelStyle::Column, tp));
      // Tied: the copy of the token embedding, the same generator and first draw as tok_embed.
      auto gen = at::make_generator<at::CPUGeneratorImpl>(init_seed(seed, spec.tie_embeddings ? -1 : -2));
      init_linear(lm_head_, gen, kInitStd);
    }
  }
}

torch::Tensor StageModuleImpl::forward(const torch::Tensor& input, const MicrobatchContext& context) {
  return forward_parts(input, 0, num_parts(), context);
}

MicrobatchContext StageModuleImpl::context(const DropoutContext& dropout, const torch::Tensor& positions,
                                           const torch::Tensor& documents, const torch::Device& device) const {
  MicrobatchContext context(dropout);
  if (documents.defined()) {
    if (device.is_cuda() && config::computes_in_bf16(precision_)) {
      auto [offsets, longest] = segment_offsets(documents);
      context.cu_seqlens = offsets.to(device);
      context.max_seqlen = longest;
    } else {
      context.attention_mask = block_causal_mask(documents.to(device));
    }
  }
  if (positions.defined()) context.positions = positions.to(device);
  if (!rope_cos_.defined()) return context;  // no rotary embedding on this stage
  if (!positions.defined()) {  // positions 0 .. seq_len - 1: the stage's own tables
    context.rope_cos = rope_cos_;
    context.rope_sin = rope_sin_;
    return context;
  }
  const auto index = context.positions.reshape({-1});  // each token's row: [batch, 1, seq_len, head_dim]
  context.rope_cos = rope_cos_.index_select(0, index).view({positions.size(0), 1, positions.size(1), -1});
  context.rope_sin = rope_sin_.index_select(0, index).view({positions.size(0), 1, positions.size(1), -1});
  return context;
}

int64_t StageModuleImpl::num_parts() const {
  return (layout_.has_embedding ? 1 : 0) + static_cast<int64_t>(blocks_.size()) +
         (layout_.has_head ? 1 : 0);
}

torch::Tensor StageModuleImpl::forward_parts(const torch::Tensor& input, int64_t begin, int64_t end,
                                             const MicrobatchContext& context) {
  const auto& dropout = context.dropout;
  PPCTL_ASSERT(0 <= begin && begin <= end && end <= num_parts(),
               fmt::format("parts [{}, {}) of a stage with {}", begin, end, num_parts()));
  const int64_t first_block = layout_.has_embedding ? 1 : 0;
  const auto blocks = static_cast<int64_t>(blocks_.size());
  const bool bf16 = config::computes_in_bf16(precision_);
  const AutocastGuard autocast(input.device().type(), bf16);
  torch::Tensor x = input;
  for (int64_t part = begin; part < end; ++part) {
    const int64_t block = part - first_block;
    if (block < 0) {
      const auto [first, last] = sequence_range(x.size(1), tp_);  // this rank's positions (all without SP)
      x = tok_embed_->forward(x);
      // bf16 weights: the residual stream stays fp32 as under bf16 over fp32 weights (positions add in fp32)
      if (precision_ == config::Precision::Bf16Params) x = x.to(torch::kFloat);
      if (pos_embed_) {
        const auto& table = pos_embed_->weight;  // under SP a partial gradient (gradient_is_partial)
        if (context.positions.defined()) {  // packed conversations: positions restart at each one
          x = x + torch::nn::functional::embedding(context.positions.slice(1, first, last), table);
        } else {
          auto positions = torch::arange(first, last, torch::dtype(torch::kLong).device(x.device()));
          x = x + torch::nn::functional::embedding(positions, table).unsqueeze(0);
        }
      }
      x = seeded_dropout(x, spec_.dropout, dropout, -1, 0, tp_);
    } else if (block < blocks) {
      x = blocks_[static_cast<size_t>(block)]->forward(x, context);
    } else {
      x = enter_tensor_parallel(ln_f_.forward<torch::Tensor>(x), tp_);  // into the column-parallel head
      if (lm_head_) {
        x = lm_head_->forward(x);
      } else {
        const bool bf16_weights = precision_ == config::Precision::Bf16Params;
        x = torch::nn::functional::linear(
            x, bf16_weights ? AccumulateSeparately::apply(tok_embed_->weight) : tok_embed_->weight);
      }
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

torch::Tensor StageModuleImpl::token_losses(const torch::Tensor& logits, const torch::Tensor& targets) const {
  const auto flat = logits.reshape({-1, logits.size(-1)});
  if (tp_.active()) return vocab_parallel_cross_entropy(flat, targets.reshape({-1}), vocab_rows().first, tp_);
  namespace F = torch::nn::functional;
  return F::cross_entropy(flat, targets.reshape({-1}), F::CrossEntropyFuncOptions().reduction(torch::kNone));
}

torch::Tensor StageModuleImpl::loss_sum(const torch::Tensor& logits, const torch::Tensor& targets,
                                        const torch::Tensor& target_mask) const {
  const auto losses = token_losses(logits, targets);
  if (!target_mask.defined()) return losses.sum();
  return (losses * target_mask.reshape({-1}).to(losses.scalar_type())).sum();
}

torch::Tensor StageModuleImpl::loss(const torch::Tensor& logits, const torch::Tensor& targets) const {
  return token_losses(logits, targets).mean();
}

std::vector<int64_t> StageModuleImpl::whole_sizes(const std::string& name, at::IntArrayRef shard_sizes) const {
  const Split split = parameter_split(name);
  auto sizes = shard_sizes.vec();
  if (split.replicated() || !tp_.active()) return sizes;
  const bool vocabulary = name == "tok_embed.weight" || name == "lm_head.weight";
  auto& split_size = sizes.at(static_cast<size_t>(split.dim));
  split_size = vocabulary ? spec_.vocab_size : split_size * tp_.size;
  return sizes;
}

torch::Tensor StageModuleImpl::whole_of(const std::string& name, const torch::Tensor& shard) const {
  const Split split = parameter_split(name);
  if (split.replicated() || !tp_.active()) return shard;
  return gather_shards(shard.contiguous(), split, whole_sizes(name, shard.sizes()), tp_);
}

torch::Tensor StageModuleImpl::shard_of(const std::string& name, const torch::Tensor& whole) const {
  return take_shard(whole, parameter_split(name), tp_.size, tp_.rank);
}

std::pair<int64_t, int64_t> StageModuleImpl::vocab_rows() const {
  return shard_range(spec_.vocab_size, tp_.size, tp_.rank);
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
