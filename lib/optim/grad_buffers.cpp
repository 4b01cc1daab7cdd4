// Contiguous gradient buffers, buckets and their data-parallel reduction (see grad_buffers.hpp).
#include "optim/grad_buffers.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"
#include "core/error.hpp"

namespace ppctl::optim {

int64_t bucket_size_of(int64_t configured, int64_t dp_size) {
  if (configured > 0) return configured;
  return std::max<int64_t>(40'000'000, 1'000'000 * dp_size);
}

std::vector<std::pair<size_t, size_t>> bucket_ranges(const std::vector<int64_t>& numels, int64_t bucket_size) {
  if (bucket_size < 1) throw Error(fmt::format("gradient bucket size {} must be at least 1 parameter", bucket_size));
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t begin = 0;
  int64_t filled = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    filled += numels[i];
    if (filled >= bucket_size || i + 1 == numels.size()) {
      ranges.emplace_back(begin, i + 1);
      begin = i + 1;
      filled = 0;
    }
  }
  return ranges;
}

StageBufferLayout stage_buffer_layout(const std::vector<int64_t>& numels, int64_t tied_index, int64_t bucket_size,
                                      int64_t pad_to) {
  PPCTL_ASSERT(pad_to >= 1, "buckets are padded to a multiple of at least 1");
  StageBufferLayout layout;
  layout.tied_index = tied_index;
  layout.offsets.assign(numels.size(), 0);
  // The runs of consecutive parameters other than the tied copy, as [begin, end) index ranges.
  std::vector<std::pair<size_t, size_t>> runs;
  size_t begin = 0;
  for (size_t i = 0; i <= numels.size(); ++i) {
    if (i == numels.size() || static_cast<int64_t>(i) == tied_index) {
      if (i > begin) runs.emplace_back(begin, i);
      begin = i + 1;
    }
  }
  int64_t offset = 0;
  size_t next = 0;  // the next parameter to place
  const auto place = [&](size_t i) {
    layout.offsets[i] = offset;
    offset += numels[i];
  };
  for (const auto& [run_begin, run_end] : runs) {
    for (; next < run_begin; ++next) place(next);  // the tied copy, before this run
    const std::vector<int64_t> run(numels.begin() + static_cast<long>(run_begin),
                                   numels.begin() + static_cast<long>(run_end));
    for (const auto& [first, last] : bucket_ranges(run, bucket_size)) {
      const int64_t bucket_offset = offset;
      for (size_t i = run_begin + first; i < run_begin + last; ++i) place(i);
      offset += (pad_to - (offset - bucket_offset) % pad_to) % pad_to;
      layout.buckets.emplace_back(bucket_offset, offset - bucket_offset);
    }
    next = run_end;
  }
  for (; next < numels.size(); ++next) place(next);  // a tied copy after the last run
  layout.numel = offset;
  return layout;
}

GradientBuffers::GradientBuffers(const std::vector<model::StageModule>& stages, comm::Communicator* data_parallel,
                                 comm::Communicator* tied_group, int64_t bucket_size, bool shard)
    : data_parallel_(data_parallel), tied_group_(tied_group), shard_(shard && data_parallel != nullptr) {
  torch::NoGradGuard no_grad;
  const int64_t dp = data_parallel != nullptr ? data_parallel->world_size() : 1;
  for (const auto& stage : stages) {
    auto& buffer = stages_[stage->layout().stage];
    buffer.tied = stage->tied_weight();
    std::vector<int64_t> numels;
    int64_t tied_index = -1;
    for (const auto& p : stage->parameters()) {
      PPCTL_ASSERT(p.scalar_type() == torch::kFloat || p.scalar_type() == torch::kBFloat16,
                   "gradient buffers hold the fp32 gradients of fp32 or bf16 parameters");
      if (buffer.tied.defined() && p.is_same(buffer.tied)) tied_index = static_cast<int64_t>(numels.size());
      numels.push_back(p.numel());
    }
    buffer.layout = stage_buffer_layout(numels, tied_index, bucket_size, shard_ ? dp : 1);
    const auto device = stage->parameters().empty() ? torch::Device(torch::kCPU) : stage->parameters().front().device();
    buffer.flat = torch::zeros({buffer.layout.numel}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    size_t index = 0;
    for (auto& p : stage->parameters()) {
      p.mutable_grad() = buffer.flat.narrow(0, buffer.layout.offsets[index++], p.numel()).view_as(p);
      buffer.params.push_back(p);
    }
    buffer.tp = stage->tensor_parallel();
    buffer.partial = model::partial_gradients(*stage, buffer.tp);
    for (const auto& [offset, numel] : buffer.layout.buckets) {
      Bucket bucket;
      bucket.flat = buffer.flat.narrow(0, offset, numel);
      bucket.own = shard_ ? bucket.flat.narrow(0, data_parallel->rank() * (numel / dp), numel / dp) : bucket.flat;
      buffer.buckets.push_back(std::move(bucket));
    }
  }
}

void GradientBuffers::zero() {
  for (auto& [index, buffer] : stages_) {
    buffer.flat.zero_();
    const auto* begin = static_cast<const char*>(buffer.flat.data_ptr());
    const auto* end = begin + buffer.flat.nbytes();
    for (const auto& p : buffer.params) {
      const auto* at = p.grad().defined() ? static_cast<const char*>(p.grad().data_ptr()) : nullptr;
      PPCTL_ASSERT(at != nullptr && at >= begin && at < end,
                   fmt::format("a gradient of stage {} is no longer a view into its buffer", index));
    }
  }
}

void GradientBuffers::start(int64_t stage) {
  auto it = stages_.find(stage);
  PPCTL_ASSERT(it != stages_.end(), fmt::format("REDUCE_GRAD of stage {}, which this rank does not hold", stage));
  auto& buffer = it->second;
  PPCTL_ASSERT(!buffer.started, fmt::format("the gradient reduction of stage {} started twice in one step", stage));
  buffer.started = true;
  buffer.done = false;
  buffer.span = {stage, std::chrono::steady_clock::now(), {}};
  // Every microbatch's backward has accumulated into the partial gradients: summed once, before dp sees them.
  model::sum_partial_gradients(buffer.partial, buffer.tp);
  if (data_parallel_ != nullptr) {
    for (size_t b = 0; b < buffer.buckets.size(); ++b) {
      auto& bucket = buffer.buckets[b];
      auto what = fmt::format("gradient bucket {} of {} of stage {}", b + 1, buffer.buckets.size(), stage);
      bucket.op = shard_ ? data_parallel_->reduce_scatter_sum_async(bucket.flat, std::move(what))
                         : data_parallel_->all_reduce_sum_async(bucket.flat, std::move(what));
      bucket.posted = true;
    }
  }
  const bool all_tied_started = std::all_of(stages_.begin(), stages_.end(), [](const auto& entry) {
    return !entry.second.tied.defined() || entry.second.started;
  });
  if (buffer.tied.defined() && all_tied_started) start_tied();
}

void GradientBuffers::start_tied() {
  torch::Tensor* first = nullptr;
  for (auto& [index, buffer] : stages_) {
    if (!buffer.tied.defined()) continue;
    if (first == nullptr) {
      first = &buffer.tied.mutable_grad();
    } else {
      first->add_(buffer.tied.grad());  // this rank holds both copies: their sum, then over the replicas
    }
  }
  if (first == nullptr) return;
  auto* group = tied_group_ != nullptr ? tied_group_ : data_parallel_;
  if (group == nullptr) return;
  tied_op_ = group->all_reduce_sum_async(*first, "tied embedding gradient");
  tied_posted_ = true;
}

bool GradientBuffers::settle(StageBuffer& buffer, bool wait) {
  const double dp = data_parallel_ != nullptr ? static_cast<double>(data_parallel_->world_size()) : 1.0;
  bool all = true;
  for (auto& bucket : buffer.buckets) {
    if (!bucket.posted) continue;
    if (wait) {
      data_parallel_->wait(bucket.op);
    } else if (!data_parallel_->poll(bucket.op)) {
      all = false;
      continue;
    }
    bucket.posted = false;
    bucket.own.div_(dp);  // the sum over the replicas -> their mean
  }
  if (all && !buffer.done) {
    buffer.done = true;
    buffer.span.end = std::chrono::steady_clock::now();
  }
  return all;
}

void GradientBuffers::poll() {
  torch::NoGradGuard no_grad;
  for (auto& [index, buffer] : stages_) {
    if (buffer.started && !buffer.done) settle(buffer, /*wait=*/false);
  }
}

void GradientBuffers::finish() {
  for (auto& [index, buffer] : stages_) {
    if (!buffer.started) start(index);
  }
  const double dp = data_parallel_ != nullptr ? static_cast<double>(data_parallel_->world_size()) : 1.0;
  torch::NoGradGuard no_grad;
  for (auto& [index, buffer] : stages_) {
    settle(buffer, /*wait=*/true);
    buffer.started = false;
  }
  tied_reduced_ = tied_posted_;
  if (tied_posted_) {
    (tied_group_ != nullptr ? tied_group_ : data_parallel_)->wait(tied_op_);
    tied_posted_ = false;
  }
  const torch::Tensor* sum = nullptr;
  for (auto& [index, buffer] : stages_) {
    if (!buffer.tied.defined()) continue;
    if (sum == nullptr) {
      if (dp > 1) buffer.tied.mutable_grad().div_(dp);
      sum = &buffer.tied.grad();
    } else {
      buffer.tied.mutable_grad().copy_(*sum);
    }
  }
}

std::vector<runtime::GradientReduction::Span> GradientBuffers::spans() const {
  std::vector<Span> out;
  for (const auto& [index, buffer] : stages_) {
    if (data_parallel_ != nullptr || (tied_reduced_ && buffer.tied.defined())) out.push_back(buffer.span);
  }
  return out;
}

size_t GradientBuffers::num_buckets(int64_t stage) const {
  const auto it = stages_.find(stage);
  return it == stages_.end() ? 0 : it->second.buckets.size();
}

const StageBufferLayout& GradientBuffers::layout(int64_t stage) const {
  const auto it = stages_.find(stage);
  PPCTL_ASSERT(it != stages_.end(), fmt::format("stage {} is not held by this rank", stage));
  return it->second.layout;
}

torch::Tensor GradientBuffers::buffer(int64_t stage) const {
  const auto it = stages_.find(stage);
  PPCTL_ASSERT(it != stages_.end(), fmt::format("stage {} is not held by this rank", stage));
  return it->second.flat;
}

void GradientBuffers::scale(double factor) {
  torch::NoGradGuard no_grad;
  for (auto& [index, buffer] : stages_) buffer.flat.mul_(factor);
}

void GradientBuffers::gather_shards() {
  if (!shard_) return;
  torch::NoGradGuard no_grad;
  std::vector<comm::PendingOp> ops;
  for (auto& [index, buffer] : stages_) {
    for (size_t b = 0; b < buffer.buckets.size(); ++b) {
      ops.push_back(data_parallel_->all_gather_inplace_async(
          buffer.buckets[b].flat, fmt::format("reduced gradient bucket {} of stage {}", b + 1, index)));
    }
  }
  for (const auto& op : ops) data_parallel_->wait(op);
}

int64_t GradientBuffers::bytes() const {
  int64_t bytes = 0;
  for (const auto& [index, buffer] : stages_) bytes += static_cast<int64_t>(buffer.flat.nbytes());
  return bytes;
}

}  // namespace ppctl::optim
