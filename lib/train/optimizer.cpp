// AdamW over a rank's stages, and the distributed optimizer over the data-parallel group (see optimizer.hpp).
#include "train/optimizer.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"

namespace ppctl::train {

std::unique_ptr<torch::optim::AdamW> make_adamw(std::vector<torch::Tensor> decay, std::vector<torch::Tensor> no_decay,
                                                const config::OptimizerSpec& spec) {
  auto options = torch::optim::AdamWOptions(spec.lr)
                     .betas({spec.beta1, spec.beta2})
                     .eps(spec.eps)
                     .weight_decay(spec.weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(decay), std::make_unique<torch::optim::AdamWOptions>(options));
  auto no_decay_options = options;
  no_decay_options.weight_decay(0.0);
  groups.emplace_back(std::move(no_decay), std::make_unique<torch::optim::AdamWOptions>(no_decay_options));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), options);
}

std::unique_ptr<torch::optim::AdamW> make_optimizer(const std::vector<model::StageModule>& stages,
                                                    const config::OptimizerSpec& spec) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& stage : stages)
    for (auto& p : stage->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  return make_adamw(std::move(decay), std::move(no_decay), spec);
}

DistributedOptimizer::DistributedOptimizer(const std::vector<model::StageModule>& stages,
                                           const GradientBuffers& gradients, comm::Communicator& data_parallel,
                                           const config::OptimizerSpec& spec, bool overlap)
    : data_parallel_(data_parallel), spec_(spec), overlap_(overlap) {
  PPCTL_ASSERT(gradients.sharded(), "the distributed optimizer needs sharded gradient buffers");
  torch::NoGradGuard no_grad;
  const int64_t dp = data_parallel.world_size(), rank = data_parallel.rank();
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& module : stages) {
    Stage stage;
    stage.index = module->layout().stage;
    stage.has_head = module->has_head();
    const auto& layout = gradients.layout(stage.index);
    const auto grads = gradients.buffer(stage.index);
    auto params = module->parameters();
    stage.flat = torch::zeros({layout.numel}, grads.options());
    stage.offsets = layout.offsets;
    for (size_t i = 0; i < params.size(); ++i) {  // re-seat each parameter in the buffer, values kept
      auto view = stage.flat.narrow(0, layout.offsets[i], params[i].numel()).view_as(params[i]);
      view.copy_(params[i]);
      params[i].set_data(view);
    }
    if (layout.tied_index >= 0) {
      stage.tied = params[static_cast<size_t>(layout.tied_index)];
      (stage.tied.dim() >= 2 ? decay : no_decay).push_back(stage.tied);
    }
    for (const auto& [offset, numel] : layout.buckets) {
      Bucket bucket;
      bucket.offset = offset;
      bucket.params = stage.flat.narrow(0, offset, numel);
      const int64_t own_begin = offset + rank * (numel / dp), own_end = own_begin + numel / dp;
      for (size_t i = 0; i < params.size(); ++i) {  // the parts of parameters inside the own slice
        if (static_cast<int64_t>(i) == layout.tied_index) continue;
        const int64_t begin = std::max(own_begin, layout.offsets[i]);
        const int64_t end = std::min(own_end, layout.offsets[i] + params[i].numel());
        if (begin >= end) continue;
        Piece piece;
        piece.param = params[i];
        piece.begin = begin - layout.offsets[i];
        piece.bucket_offset = begin - own_begin;
        piece.tensor = stage.flat.narrow(0, begin, end - begin).detach();
        piece.tensor.mutable_grad() = grads.narrow(0, begin, end - begin);
        (params[i].dim() >= 2 ? decay : no_decay).push_back(piece.tensor);
        bucket.pieces.push_back(pieces_.size());
        pieces_.push_back(std::move(piece));
      }
      stage.buckets.push_back(std::move(bucket));
    }
    stages_.push_back(std::move(stage));
  }
  local_ = make_adamw(std::move(decay), std::move(no_decay), spec);
}

std::map<int64_t, std::vector<torch::Tensor>> DistributedOptimizer::owned_gradients() const {
  std::map<int64_t, std::vector<torch::Tensor>> owned;
  for (const auto& stage : stages_) {
    auto& list = owned[stage.index];
    for (const auto& bucket : stage.buckets)
      for (const auto i : bucket.pieces) list.push_back(pieces_[i].tensor.grad());
    if (stage.tied.defined() && !stage.has_head && data_parallel_.rank() == 0) list.push_back(stage.tied.grad());
  }
  return owned;
}

void DistributedOptimizer::step() {
  wait_all();  // a step skipped since the last one leaves nothing in flight; a step never posts twice
  local_->step();
  ++steps_taken_;
  torch::NoGradGuard no_grad;
  for (auto& stage : stages_) {
    auto& ops = gathering_[stage.index];
    for (size_t b = 0; b < stage.buckets.size(); ++b) {
      ops.push_back(data_parallel_.all_gather_inplace_async(
          stage.buckets[b].params, fmt::format("parameter bucket {} of {} of stage {}", b + 1, stage.buckets.size(),
                                               stage.index)));
    }
  }
  if (!overlap_) wait_all();
}

void DistributedOptimizer::ready(int64_t stage) {
  const auto it = gathering_.find(stage);
  if (it == gathering_.end()) return;
  for (const auto& op : it->second) data_parallel_.wait(op);
  gathering_.erase(it);
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

std::unique_ptr<torch::optim::AdamW> DistributedOptimizer::gather_state(
    const std::vector<model::StageModule>& stages) {
  wait_all();  // the parameters whole before the moments' collectives
  torch::NoGradGuard no_grad;
  auto full = make_optimizer(stages, spec_);
  if (steps_taken_ == 0) return full;  // AdamW holds no state before its first step
  const auto& state = local_->state();
  const auto put = [&](const torch::Tensor& param, torch::Tensor exp_avg, torch::Tensor exp_avg_sq) {
    auto entry = std::make_unique<torch::optim::AdamWParamState>();
    entry->step(steps_taken_);
    entry->exp_avg(std::move(exp_avg));
    entry->exp_avg_sq(std::move(exp_avg_sq));
    full->state()[param.unsafeGetTensorImpl()] = std::move(entry);
  };
  const int64_t dp = data_parallel_.world_size(), rank = data_parallel_.rank();
  size_t module = 0;
  for (const auto& stage : stages_) {
    const auto params = stages.at(module++)->parameters();
    if (stage.tied.defined()) {
      const auto& tied = static_cast<const torch::optim::AdamWParamState&>(*state.at(stage.tied.unsafeGetTensorImpl()));
      put(stage.tied, cpu_copy(tied.exp_avg()), cpu_copy(tied.exp_avg_sq()));
    }
    for (size_t b = 0; b < stage.buckets.size(); ++b) {
      const auto& bucket = stage.buckets[b];
      const int64_t numel = bucket.params.numel(), slice = numel / dp;
      // Both moments of the bucket: this rank's pieces in its own slice, then gathered.
      std::vector<torch::Tensor> moments{torch::zeros({numel}, bucket.params.options()),
                                         torch::zeros({numel}, bucket.params.options())};
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
  return full;
}

void DistributedOptimizer::scatter_state(const torch::optim::AdamW& full,
                                         const std::vector<model::StageModule>& stages) {
  torch::NoGradGuard no_grad;
  const auto& source = full.state();
  auto& target = local_->state();
  target.clear();
  // Every parameter's state counts the same steps; a rank whose shard holds no piece still needs
  // the count, since gather_state's collectives depend on it.
  steps_taken_ = 0;
  for (const auto& module : stages) {
    for (const auto& p : module->parameters()) {
      const auto it = source.find(p.unsafeGetTensorImpl());
      if (it != source.end()) steps_taken_ = static_cast<const torch::optim::AdamWParamState&>(*it->second).step();
    }
  }
  const auto find = [&](const torch::Tensor& param) -> const torch::optim::AdamWParamState* {
    const auto it = source.find(param.unsafeGetTensorImpl());
    return it == source.end() ? nullptr : &static_cast<const torch::optim::AdamWParamState&>(*it->second);
  };
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
    if (const auto* from = find(stage.tied)) put(stage.tied, *from, 0);
  }
  for (const auto& piece : pieces_) {
    if (const auto* from = find(piece.param)) put(piece.tensor, *from, piece.begin);
  }
}

int64_t adamw_state_bytes(const torch::optim::AdamW& optimizer) {
  int64_t bytes = 0;
  for (const auto& [impl, state] : optimizer.state()) {
    const auto& entry = static_cast<const torch::optim::AdamWParamState&>(*state);
    bytes += static_cast<int64_t>(entry.exp_avg().nbytes() + entry.exp_avg_sq().nbytes());
  }
  return bytes;
}

}  // namespace ppctl::train
