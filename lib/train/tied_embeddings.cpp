// The tied embedding copies' hash line (see tied_embeddings.hpp).
#include "train/tied_embeddings.hpp"

#include <spdlog/spdlog.h>

#include <string>

#include "core/atomic_file.hpp"

namespace ppctl::train {

namespace {

/// core::fnv1a64 of the bytes of `tensors`, one after the other (undefined ones count as none).
uint64_t hash_of(const std::vector<torch::Tensor>& tensors) {
  std::string bytes;
  for (const auto& tensor : tensors) {
    if (!tensor.defined()) continue;
    const auto cpu = tensor.detach().cpu().contiguous();
    bytes.append(static_cast<const char*>(cpu.data_ptr()), cpu.nbytes());
  }
  return core::fnv1a64(bytes);
}

}  // namespace

void log_tied_weights(const std::vector<model::StageModule>& stages, optim::StepOptimizer& optimizer) {
  for (const auto& stage : stages) {
    const auto weight = stage->tied_weight();
    if (!weight.defined()) continue;
    std::vector<torch::Tensor> moments;
    const auto& states = optimizer.local().state();
    const auto state = states.find(optimizer.stepped(weight).unsafeGetTensorImpl());
    if (state != states.end()) {
      const auto& adamw = static_cast<const torch::optim::AdamWParamState&>(*state->second);
      moments = {adamw.exp_avg(), adamw.exp_avg_sq()};
    }
    spdlog::info("tied embedding on stage {}: fnv1a64 {:016x}, moments fnv1a64 {:016x}", stage->layout().stage,
                 hash_of({weight}), hash_of(moments));
  }
}

}  // namespace ppctl::train
