// Gradient sum of the tied embedding copies (see tied_embeddings.hpp).
#include "train/tied_embeddings.hpp"

#include <spdlog/spdlog.h>

namespace ppctl::train {

void sync_tied_embeddings(const std::vector<model::StageModule>& stages, comm::Communicator* group) {
  std::vector<torch::Tensor> copies;
  for (const auto& stage : stages) {
    auto weight = stage->tied_weight();
    if (!weight.defined()) continue;
    if (!weight.grad().defined()) weight.mutable_grad() = torch::zeros_like(weight);
    copies.push_back(weight);
  }
  if (copies.empty()) return;
  torch::NoGradGuard no_grad;
  auto sum = copies.front().grad().clone();
  for (size_t i = 1; i < copies.size(); ++i) sum.add_(copies[i].grad());
  if (group != nullptr) group->all_reduce_sum_inplace(sum);
  for (auto& weight : copies) weight.grad().copy_(sum);
}

void log_tied_weights(const std::vector<model::StageModule>& stages) {
  for (const auto& stage : stages) {
    const auto weight = stage->tied_weight();
    if (!weight.defined()) continue;
    const auto bytes = weight.detach().cpu().contiguous();
    const auto* data = static_cast<const unsigned char*>(bytes.data_ptr());
    uint64_t hash = 14695981039346656037ULL;  // FNV-1a, 64 bit
    for (size_t i = 0; i < bytes.nbytes(); ++i) hash = (hash ^ data[i]) * 1099511628211ULL;
    spdlog::info("tied embedding on stage {}: fnv1a64 {:016x}", stage->layout().stage, hash);
  }
}

}  // namespace ppctl::train
