// The distributed optimizer over the data-parallel group, for fp32 or bf16 weights (see
// distributed_optimizer.hpp).
#include "optim/distributed_optimizer.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"
#include "optim/grad_norm.hpp"

namespace ppctl::optim {

DistributedOptimizer::DistributedOptimizer(const std::vector<model::StageModule>& stages,
                                           const GradientBuffers& gradients, comm::Communicator& data_parallel,
                                           const config::OptimizerSpec& spec, bool overlap, bool bf16_weights,
                                           const torch::optim::AdamW* loaded)
    : data_parallel_(data_parallel), spec_(spec), overlap_(overlap), bf16_weights_(bf16_weights) {
  PPCTL_ASSERT(gradients.sharded(), "the distributed optimizer needs sharded gradient buffers");
  torch::NoGradGuard no_grad;
  const int64_t dp = data_parallel.world_size(), rank = data_parallel.rank();
  const auto weight_type = bf16_weights ? torch::kBFloat16 : torch::kFloat;
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& module : stages) {
    Stage stage;
    stage.index = module->layout().stage;
    stage.has_head = module->has_head();
    const auto& layout = gradients.layout(stage.index);
    const auto grads = gradients.buffer(stage.index);
    auto params = module->parameters();
    std::vector<bool> counted;  // t > 1: a replicated parameter counts in the norm on tp rank 0 only
    for (const auto& item : module->named_parameters()) counted.push_back(counts_in_norm(*module, item.key()));
    for (const auto& p : params) PPCTL_ASSERT(p.scalar_type() == torch::kFloat, "the optimizer starts from fp32 parameters");
    stage.flat = torch::zeros({layout.numel}, grads.options().dtype(weight_type));
    stage.offsets = layout.offsets;
    if (layout.tied_index >= 0) {
      stage.tied = params[static_cast<size_t>(layout.tied_index)];
      stage.tied_main = stage.tied;
      if (bf16_weights) {
        stage.tied_main = stage.tied.detach().clone();  // fp32, unrounded
        stage.tied_main.mutable_grad() = stage.tied.grad();
      }
      (stage.tied.dim() >= 2 ? decay : no_decay).push_back(stage.tied_main);
    }
    for (const auto& [offset, numel] : layout.buckets) {
      Bucket bucket;
      bucket.offset = offset;
      bucket.params = stage.flat.narrow(0, offset, numel);
      const int64_t own_begin = offset + rank * (numel / dp), own_end = own_begin + numel / dp;
      bucket.main = bf16_weights ? torch::zeros({numel / dp}, grads.options())
                                 : stage.flat.narrow(0, own_begin, numel / dp);
      for (size_t i = 0; i < params.size(); ++i) {  // the parts of parameters inside the own slice
        if (static_cast<int64_t>(i) == layout.tied_index) continue;
        const int64_t begin = std::max(own_begin, layout.offsets[i]);
        const int64_t end = std::min(own_end, layout.offsets[i] + params[i].numel());
        if (begin >= end) continue;
        Piece piece;
        piece.param = params[i];
        piece.counted = counted[i];
        piece.begin = begin - layout.offsets[i];
        piece.bucket_offset = begin - own_begin;
        piece.tensor = bucket.main.narrow(0, piece.bucket_offset, end - begin).detach();
        // The fp32 values: from the parameter itself (the weights' buffer is filled below).
        if (bf16_weights) piece.tensor.copy_(params[i].detach().reshape({-1}).narrow(0, piece.begin, end - begin));
        piece.tensor.mutable_grad() = grads.narrow(0, begin, end - begin);
        (params[i].dim() >= 2 ? decay : no_decay).push_back(piece.tensor);
        bucket.pieces.push_back(pieces_.size());
        pieces_.push_back(std::move(piece));
      }
      stage.buckets.push_back(std::move(bucket));
    }
    for (size_t i = 0; i < params.size(); ++i) {  // re-seat each parameter in the buffer, values kept (rounded)
      auto view = stage.flat.narrow(0, layout.offsets[i], params[i].numel()).view_as(params[i]);
      view.copy_(params[i]);
      params[i].set_data(view);
    }
    stages_.push_back(std::move(stage));
  }
  local_ = make_adamw(std::move(decay), std::move(no_decay), spec);
  if (loaded == nullptr) return;
  // Every parameter's state counts the same steps; a rank whose shard holds no piece still needs
  // the count, since checkpoint_state's collectives depend on it.
  const auto& source = loaded->state();
  const auto find = [&](const torch::Tensor& param) -> const torch::optim::AdamWParamState* {
    const auto it = source.find(param.unsafeGetTensorImpl());
    return it == source.end() ? nullptr : &static_cast<const torch::optim::AdamWParamState&>(*it->second);
  };
  for (const auto& module : stages)
    for (const auto& p : module->parameters())
      if (const auto* from = find(p)) steps_taken_ = from->step();
  auto& target = local_->state();
  const auto put = [&](const torch::Tensor& tensor, const torch::optim::AdamWParamState& from, int64_t begin) {
    auto entry = std::make_unique<torch::optim::AdamWParamState>();
    entry->step(from.step());
    const auto part = [&](const torch::Tensor& moment) {
      return moment.reshape({-1}).narrow(0, begin, tensor.numel()).view_as(tensor).to(tensor.device()).clone();
    };
    entry->exp_avg(part(from.exp_avg()));
    entry->exp_avg_sq(part(from.exp_avg_sq()));
    target[tensor.unsafeGetTensorImpl()] = std::move(entry);
  };
  for (const auto& stage : stages_) {
    if (!stage.tied.defined()) continue;
    if (const auto* from = find(stage.tied)) put(stage.tied_main, *from, 0);
  }
  for (const auto& piece : pieces_) {
    if (const auto* from = find(piece.param)) put(piece.tensor, *from, piece.begin);
  }
}

std::map<int64_t, std::vector<torch::Tensor>> DistributedOptimizer::owned_gradients() const {
  std::map<int64_t, std::vector<torch::Tensor>> owned;
  for (const auto& stage : stages_) {
    auto& list = owned[stage.index];
    for (const auto& bucket : stage.buckets)
      for (const auto i : bucket.pieces)
        if (pieces_[i].counted) list.push_back(pieces_[i].tensor.grad());
    if (stage.tied.defined() && !stage.has_head && data_parallel_.rank() == 0) list.push_back(stage.tied.grad());
  }
  return owned;
}

void DistributedOptimizer::step() {
  wait_all();  // a step skipped since the last one leaves nothing in flight; a step never posts twice
  local_->step();
  ++steps_taken_;
  torch::NoGradGuard no_grad;
  const int64_t dp = data_parallel_.world_size(), rank = data_parallel_.rank();
  for (auto& stage : stages_) {
    if (bf16_weights_) {  // the stepped fp32 mains rounded into this replica's slice of the bf16 weights
      for (auto& bucket : stage.buckets) {
        const int64_t slice = bucket.params.numel() / dp;
        bucket.params.narrow(0, rank * slice, slice).copy_(bucket.main);
      }
      if (stage.tied.defined()) stage.tied.data().copy_(stage.tied_main);
    }
    auto& ops = gathering_[stage.index];
    for (size_t b = 0; b < stage.buckets.size(); ++b) {
      ops.push_back(data_parallel_.all_gather_inplace_async(
          stage.buckets[b].params, fmt::format("parameter bucket {} of {} of stage {}", b + 1, stage.buckets.size(),
                                               stage.index)));
    }
  }
  if (!overlap_) wait_all();
}

bool DistributedOptimizer::ready(int64_t stage) {
  const auto it = gathering_.find(stage);
  if (it == gathering_.end()) return false;
  for (const auto& op : it->second) data_parallel_.wait(op);
  gathering_.erase(it);
  return true;
}

void DistributedOptimizer::wait_all() {
  while (!gathering_.empty()) ready(gathering_.begin()->first);
}

namespace {

/// `tensor` copied to the CPU (a new tensor even when it is there already).
torch::Tensor cpu_copy(const torch::Tensor& tensor) {
  return tensor.to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace

std::vector<torch::Tensor> DistributedOptimizer::gather_main_weights(const std::vector<model::StageModule>& stages) {
  std::vector<torch::Tensor> weights;
  if (!bf16_weights_) return weights;
  torch::NoGradGuard no_grad;
  const int64_t dp = data_parallel_.world_size(), rank = data_parallel_.rank();
  size_t module = 0;
  for (const auto& stage : stages_) {
    const auto params = stages.at(module++)->parameters();
    const auto first = weights.size();
    weights.resize(first + params.size());
    for (size_t b = 0; b < stage.buckets.size(); ++b) {
      const auto& bucket = stage.buckets[b];
      const int64_t numel = bucket.params.numel(), slice = numel / dp;
      auto whole = torch::zeros({numel}, bucket.main.options());
      whole.narrow(0, rank * slice, slice).copy_(bucket.main);
      data_parallel_.wait(data_parallel_.all_gather_inplace_async(
          whole, fmt::format("main parameter bucket {} of stage {}", b + 1, stage.index)));
      for (size_t i = 0; i < params.size(); ++i) {  // every parameter starting in this bucket lies whole inside it
        const int64_t at = stage.offsets[i] - bucket.offset;
        if (at < 0 || at >= numel || (stage.tied.defined() && params[i].is_same(stage.tied))) continue;
        weights[first + i] = cpu_copy(whole.narrow(0, at, params[i].numel()).view_as(params[i]));
      }
    }
    for (size_t i = 0; i < params.size(); ++i)
      if (stage.tied.defined() && params[i].is_same(stage.tied)) weights[first + i] = cpu_copy(stage.tied_main);
  }
  return weights;
}

CheckpointState DistributedOptimizer::checkpoint_state(const std::vector<model::StageModule>& stages) {
  wait_all();  // the parameters whole before the moments' collectives
  torch::NoGradGuard no_grad;
  CheckpointState out;
  out.weights = gather_main_weights(stages);
  out.owned = make_optimizer(stages, spec_);
  out.optimizer = out.owned.get();
  auto& full = *out.owned;
  if (steps_taken_ == 0) return out;  // AdamW holds no state before its first step
  const auto& state = local_->state();
  const auto put = [&](const torch::Tensor& param, torch::Tensor exp_avg, torch::Tensor exp_avg_sq) {
    auto entry = std::make_unique<torch::optim::AdamWParamState>();
    entry->step(steps_taken_);
    entry->exp_avg(std::move(exp_avg));
    entry->exp_avg_sq(std::move(exp_avg_sq));
    full.state()[param.unsafeGetTensorImpl()] = std::move(entry);
  };
  const int64_t dp = data_parallel_.world_size(), rank = data_parallel_.rank();
  size_t module = 0;
  for (const auto& stage : stages_) {
    const auto params = stages.at(module++)->parameters();
    if (stage.tied.defined()) {
      const auto& tied =
          static_cast<const torch::optim::AdamWParamState&>(*state.at(stage.tied_main.unsafeGetTensorImpl()));
      put(stage.tied, cpu_copy(tied.exp_avg()), cpu_copy(tied.exp_avg_sq()));
    }
    for (size_t b = 0; b < stage.buckets.size(); ++b) {
      const auto& bucket = stage.buckets[b];
      const int64_t numel = bucket.params.numel(), slice = numel / dp;
      // Both moments of the bucket: this rank's pieces in its own slice, then gathered.
      std::vector<torch::Tensor> moments{torch::zeros({numel}, bucket.main.options()),
                                         torch::zeros({numel}, bucket.main.options())};
      for (const auto i : bucket.pieces) {
        const auto& piece = pieces_[i];
        const auto& entry =
            static_cast<const torch::optim::AdamWParamState&>(*state.at(piece.tensor.unsafeGetTensorImpl()));
        moments[0].narrow(0, rank * slice + piece.bucket_offset, piece.tensor.numel()).copy_(entry.exp_avg());
        moments[1].narrow(0, rank * slice + piece.bucket_offset, piece.tensor.numel()).copy_(entry.exp_avg_sq());
      }
      for (auto& moment : moments) {
        data_parallel_.wait(data_parallel_.all_gather_inplace_async(
            moment, fmt::format("optimizer state bucket {} of stage {}", b + 1, stage.index)));
      }
      // Every parameter starting in this bucket lies whole inside it.
      for (size_t i = 0; i < params.size(); ++i) {
        const int64_t first = stage.offsets[i] - bucket.offset;
        if (first < 0 || first >= numel) continue;
        put(params[i], cpu_copy(moments[0].narrow(0, first, params[i].numel()).view_as(params[i])),
            cpu_copy(moments[1].narrow(0, first, params[i].numel()).view_as(params[i])));
      }
    }
  }
  return out;
}

torch::Tensor DistributedOptimizer::stepped(const torch::Tensor& param) const {
  for (const auto& stage : stages_)
    if (stage.tied.defined() && stage.tied.is_same(param)) return stage.tied_main;
  return param;
}

int64_t DistributedOptimizer::main_parameter_bytes() const {
  int64_t bytes = 0;
  if (!bf16_weights_) return 0;
  for (const auto& stage : stages_) {
    for (const auto& bucket : stage.buckets) bytes += static_cast<int64_t>(bucket.main.nbytes());
    if (stage.tied.defined()) bytes += static_cast<int64_t>(stage.tied_main.nbytes());
  }
  return bytes;
}

}  // namespace ppctl::optim
