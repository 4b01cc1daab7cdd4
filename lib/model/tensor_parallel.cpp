// Tensor-parallel shards, the f and g regions, parallel linear layers, the vocabulary-parallel embedding and
// cross-entropy (see tensor_parallel.hpp).
#include "model/tensor_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "core/check.hpp"
#include "plan/shard_pieces.hpp"

namespace ppctl::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group rides in the autograd context as an integer: the Communicator outlives every graph (the worker's
// groups are built before the stages and destroyed after the executor).
void keep_group(AutogradContext* ctx, const TensorParallel& tp) {
  ctx->saved_data["group"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(tp.group));
}

comm::Communicator& group_of(AutogradContext* ctx) {
  return *reinterpret_cast<comm::Communicator*>(static_cast<intptr_t>(ctx->saved_data["group"].toInt()));
}

/// The sum of `x` over the group in a new tensor (x is left as it is).
torch::Tensor summed(const torch::Tensor& x, comm::Communicator& group) {
  auto out = x.contiguous().clone();
  group.all_reduce_sum_inplace(out);
  return out;
}

struct CopyRegion : public torch::autograd::Function<CopyRegion> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const TensorParallel& tp) {
    keep_group(ctx, tp);
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {summed(grads[0], group_of(ctx)), torch::Tensor()};
  }
};

struct ReduceRegion : public torch::autograd::Function<ReduceRegion> {
  static torch::Tensor forward(AutogradContext* /*ctx*/, const torch::Tensor& x, const TensorParallel& tp) {
    return summed(x, *tp.group);
  }
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grads) { return {grads[0], torch::Tensor()}; }
};

/// [batch, s / t, hidden] from every rank -> [batch, s, hidden], rank r's at positions [r s/t, (r+1) s/t).
torch::Tensor all_gather_sequence(const torch::Tensor& x, comm::Communicator& group) {
  const int64_t t = group.world_size();
  auto gathered = torch::empty({t, x.size(0), x.size(1), x.size(2)}, x.options());
  gathered[group.rank()].copy_(x);
  auto flat = gathered.view({-1});
  group.wait(group.all_gather_inplace_async(flat, "tensor-parallel all-gather along the sequence"));
  return gathered.permute({1, 0, 2, 3}).reshape({x.size(0), t * x.size(1), x.size(2)});
}

/// [batch, s, hidden] partial sums on every rank -> this rank's positions of the sum, [batch, s / t, hidden].
torch::Tensor reduce_scatter_sequence(const torch::Tensor& x, comm::Communicator& group) {
  const int64_t t = group.world_size();
  auto parts = x.reshape({x.size(0), t, x.size(1) / t, x.size(2)}).permute({1, 0, 2, 3}).contiguous();
  auto flat = parts.view({-1});
  group.wait(group.reduce_scatter_sum_async(flat, "tensor-parallel reduce-scatter along the sequence"));
  return parts[group.rank()].clone();
}

struct GatherSequence : public torch::autograd::Function<GatherSequence> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const TensorParallel& tp) {
    keep_group(ctx, tp);
    return all_gather_sequence(x.contiguous(), *tp.group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {reduce_scatter_sequence(grads[0], group_of(ctx)), torch::Tensor()};
  }
};

struct ScatterSequence : public torch::autograd::Function<ScatterSequence> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const TensorParallel& tp) {
    keep_group(ctx, tp);
    return reduce_scatter_sequence(x, *tp.group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_gather_sequence(grads[0].contiguous(), group_of(ctx)), torch::Tensor()};
  }
};

/// Megatron's _VocabParallelCrossEntropy: forward keeps this rank's softmax rows and where the targets fall.
struct VocabParallelCrossEntropy : public torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits, const torch::Tensor& targets,
                               int64_t vocab_begin, const TensorParallel& tp) {
    const int64_t n = logits.size(0), rows = logits.size(1);
    auto& group = *tp.group;
    // The largest logit of each token over every rank: the ranks' maxima side by side, summed into place.
    auto maxima = torch::zeros({tp.size, n}, logits.options());
    maxima[tp.rank].copy_(std::get<0>(logits.max(-1)));
    group.all_reduce_sum_inplace(maxima);
    const auto shifted = logits - std::get<0>(maxima.max(0)).unsqueeze(-1);
    auto exp = shifted.exp();
    const auto local = targets - vocab_begin;
    const auto mine = (local >= 0) & (local < rows);
    const auto index = torch::where(mine, local, torch::zeros_like(local));
    auto sums = torch::stack({exp.sum(-1), shifted.gather(-1, index.unsqueeze(-1)).squeeze(-1) *
                                               mine.to(logits.scalar_type())});
    group.all_reduce_sum_inplace(sums);
    const auto sum_exp = sums[0];
    exp.div_(sum_exp.unsqueeze(-1));  // this rank's softmax rows
    ctx->save_for_backward({exp, index, mine});
    return sum_exp.log() - sums[1];
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto grad = saved[0].clone();
    grad.scatter_add_(-1, saved[1].unsqueeze(-1), -saved[2].to(grad.scalar_type()).unsqueeze(-1));
    grad.mul_(grads[0].unsqueeze(-1));
    return {grad, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

std::pair<int64_t, int64_t> shard_range(int64_t n, int64_t size, int64_t rank) {
  return plan::shard_range(n, size, rank);  // one rule for the model, checkpoints and Hugging Face slices
}

Split parameter_split(const std::string& name) {
  const size_t last = name.rfind('.');
  if (last == std::string::npos) return {};
  const std::string leaf = name.substr(last + 1);
  const size_t before = name.rfind('.', last - 1);
  const std::string module = name.substr(before == std::string::npos ? 0 : before + 1,
                                         last - (before == std::string::npos ? 0 : before + 1));
  for (const char* column : {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "fc1"}) {
    if (module == column) return {0, 1};
  }
  if (module == "qkv") return {0, 3};
  if ((module == "tok_embed" || module == "lm_head") && leaf == "weight") return {0, 1};
  for (const char* row : {"o_proj", "down_proj", "proj", "fc2"}) {
    if (module == row) return leaf == "weight" ? Split{1, 1} : Split{};
  }
  return {};
}

bool gradient_is_partial(const std::string& name, const TensorParallel& tp) {
  if (!tp.active() || !parameter_split(name).replicated()) return false;
  if (tp.splits_sequence()) return true;
  // qwen3's per-head norms: `q_norm.weight`, `block3.k_norm.weight`
  const auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0 &&
           (name.size() == tail.size() || name[name.size() - tail.size() - 1] == '.');
  };
  return ends_with("q_norm.weight") || ends_with("k_norm.weight");
}

std::vector<torch::Tensor> partial_gradients(const torch::nn::Module& module, const TensorParallel& tp) {
  std::vector<torch::Tensor> gradients;
  for (const auto& item : module.named_parameters()) {
    if (!gradient_is_partial(item.key(), tp)) continue;
    PPCTL_ASSERT(item.value().grad().defined(), "partial_gradients: " + item.key() + " has no gradient");
    gradients.push_back(item.value().grad());
  }
  return gradients;
}

void sum_partial_gradients(const std::vector<torch::Tensor>& gradients, const TensorParallel& tp) {
  if (!tp.active() || gradients.empty()) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat;
  for (const auto& g : gradients) flat.push_back(g.reshape({-1}));
  auto sum = torch::cat(flat);
  tp.group->all_reduce_sum_inplace(sum);
  int64_t offset = 0;
  for (const auto& g : gradients) {
    g.copy_(sum.narrow(0, offset, g.numel()).view_as(g));
    offset += g.numel();
  }
}

torch::Tensor take_shard(const torch::Tensor& full, const Split& split, int64_t size, int64_t rank) {
  if (split.replicated() || size == 1) return full;
  const int64_t n = full.size(split.dim) / split.parts;
  const auto [begin, end] = shard_range(n, size, rank);
  if (split.parts == 1) return full.narrow(split.dim, begin, end - begin);
  std::vector<torch::Tensor> pieces;
  for (int64_t part = 0; part < split.parts; ++part) pieces.push_back(full.narrow(split.dim, part * n + begin, end - begin));
  return torch::cat(pieces, split.dim);
}

torch::Tensor gather_shards(const torch::Tensor& shard, const Split& split, const std::vector<int64_t>& full_sizes,
                            const TensorParallel& tp) {
  if (split.replicated() || !tp.active()) return shard;
  auto full = torch::zeros(full_sizes, shard.options());
  const int64_t n = full.size(split.dim) / split.parts;
  const auto [begin, end] = shard_range(n, tp.size, tp.rank);
  for (int64_t part = 0; part < split.parts; ++part) {
    full.narrow(split.dim, part * n + begin, end - begin)
        .copy_(shard.narrow(split.dim, part * (end - begin), end - begin));
  }
  tp.group->all_reduce_sum_inplace(full);
  return full;
}

torch::Tensor tensor_parallel_copy(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.active() ? CopyRegion::apply(x, tp) : x;
}

torch::Tensor tensor_parallel_reduce(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.active() ? ReduceRegion::apply(x, tp) : x;
}

torch::Tensor enter_tensor_parallel(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.splits_sequence() ? GatherSequence::apply(x, tp) : tensor_parallel_copy(x, tp);
}

torch::Tensor leave_tensor_parallel(const torch::Tensor& x, const TensorParallel& tp) {
  return tp.splits_sequence() ? ScatterSequence::apply(x, tp) : tensor_parallel_reduce(x, tp);
}

std::pair<int64_t, int64_t> sequence_range(int64_t seq, const TensorParallel& tp) {
  if (!tp.splits_sequence()) return {0, seq};
  PPCTL_ASSERT(seq % tp.size == 0, fmt::format("a sequence of {} over {} ranks", seq, tp.size));
  return {tp.rank * (seq / tp.size), (tp.rank + 1) * (seq / tp.size)};
}

ParallelLinearImpl::ParallelLinearImpl(int64_t in, int64_t out, bool bias, ParallelStyle style,
                                       const TensorParallel& tp, int64_t parts)
    : in_(in), out_(out), style_(tp.active() ? style : ParallelStyle::Replicated), tp_(tp) {
  if (style_ == ParallelStyle::Column) split_ = {0, parts};
  if (style_ == ParallelStyle::Row) split_ = {1, 1};
  const auto shape = take_shard(torch::empty({out, in}, torch::kMeta), split_, tp.size, tp.rank).sizes().vec();
  weight = register_parameter("weight", torch::empty(shape));
  if (bias) {
    const int64_t width = style_ == ParallelStyle::Column ? shape[0] : out;
    this->bias = register_parameter("bias", torch::zeros({width}));
  }
  // torch::nn::Linear's default initialisation (kaiming-uniform) would draw from the global generator: every
  // caller draws with init_normal instead.
  torch::NoGradGuard no_grad;
  weight.zero_();
}

torch::Tensor ParallelLinearImpl::forward(const torch::Tensor& x) {
  if (style_ != ParallelStyle::Row) return torch::nn::functional::linear(x, weight, bias);
  auto y = leave_tensor_parallel(torch::nn::functional::linear(x, weight), tp_);
  return bias.defined() ? y + bias : y;  // under SP a partial gradient (gradient_is_partial)
}

void ParallelLinearImpl::init_normal(at::Generator& gen, double std) {
  torch::NoGradGuard no_grad;
  if (style_ == ParallelStyle::Replicated) {
    weight.normal_(0.0, std, gen);
  } else {
    auto full = torch::empty({out_, in_});
    full.normal_(0.0, std, gen);
    weight.copy_(take_shard(full, split_, tp_.size, tp_.rank));
  }
  if (bias.defined()) bias.zero_();
}

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(int64_t vocab, int64_t hidden, const TensorParallel& tp)
    : vocab_(vocab), hidden_(hidden), rows_(shard_range(vocab, tp.size, tp.rank)), tp_(tp) {
  weight = register_parameter("weight", torch::zeros({rows_.second - rows_.first, hidden}));
}

torch::Tensor VocabParallelEmbeddingImpl::forward(const torch::Tensor& ids) {
  if (!tp_.active()) return torch::nn::functional::embedding(ids, weight);
  const auto local = ids - rows_.first;
  const auto mine = (local >= 0) & (local < rows_.second - rows_.first);
  const auto looked_up =
      torch::nn::functional::embedding(torch::where(mine, local, torch::zeros_like(local)), weight);
  return leave_tensor_parallel(looked_up * mine.unsqueeze(-1).to(looked_up.scalar_type()), tp_);
}

void VocabParallelEmbeddingImpl::init_normal(at::Generator& gen, double std) {
  torch::NoGradGuard no_grad;
  if (!tp_.active()) {
    weight.normal_(0.0, std, gen);
    return;
  }
  auto full = torch::empty({vocab_, hidden_});
  full.normal_(0.0, std, gen);
  weight.copy_(full.narrow(0, rows_.first, rows_.second - rows_.first));
}

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                           int64_t vocab_begin, const TensorParallel& tp) {
  PPCTL_ASSERT(tp.active(), "vocab_parallel_cross_entropy without a tensor-parallel group");
  return VocabParallelCrossEntropy::apply(logits, targets, vocab_begin, tp);
}

}  // namespace ppctl::model
