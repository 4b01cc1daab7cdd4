// The tied embedding copies' hash line (see tied_embeddings.hpp).
#include "train/tied_embeddings.hpp"

#include <spdlog/spdlog.h>

namespace ppctl::train {

namespace {

/// FNV-1a (64 bit) over the bytes of `tensors`, in order, continuing from `hash`.
uint64_t fnv1a64(const std::vector<torch::Tensor>& tensors, uint64_t hash = 14695981039346656037ULL) {
  for (const auto& tensor : tensors) {
    if (!tensor.defined()) continue;
    const auto bytes = tensor.detach().cpu().contiguous();
    const auto* data = static_cast<const unsigned char*>(bytes.data_ptr());
    for (size_t i = 0; i < bytes.nbytes(); ++i) hash = (hash ^ data[i]) * 1099511628211ULL;
  }
  return hash;
}

}  // namespace

void log_tied_weights(const std::vector<model::StageModule>& stages, torch::optim::Optimizer& optimizer) {
  for (const auto& stage : stages) {
    const auto weight = stage->tied_weight();
    if (!weight.defined()) continue;
    std::vector<torch::Tensor> moments;
    const auto state = optimizer.state().find(weight.unsafeGetTensorImpl());
    if (state != optimizer.state().end()) {
      const auto& adamw = static_cast<const torch::optim::AdamWParamState&>(*state->second);
      moments = {adamw.exp_avg(), adamw.exp_avg_sq()};
    }
    spdlog::info("tied embedding on stage {}: fnv1a64 {:016x}, moments fnv1a64 {:016x}", stage->layout().stage,
                 fnv1a64({weight}), fnv1a64(moments));
  }
}

}  // namespace ppctl::train
