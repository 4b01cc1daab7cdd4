// AdamW's construction, the replicated optimizer over fp32 main parameters, and the seating of fp32
// weights for a checkpoint (see optimizer.hpp).
#include "optim/optimizer.hpp"

#include <fmt/format.h>

#include "core/check.hpp"
#include "optim/grad_norm.hpp"

namespace ppctl::optim {

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

int64_t adamw_state_bytes(const torch::optim::AdamW& optimizer) {
  int64_t bytes = 0;
  for (const auto& [impl, state] : optimizer.state()) {
    const auto& entry = static_cast<const torch::optim::AdamWParamState&>(*state);
    bytes += static_cast<int64_t>(entry.exp_avg().nbytes() + entry.exp_avg_sq().nbytes());
  }
  return bytes;
}

void convert_weights_to_bf16(const std::vector<model::StageModule>& stages) {
  torch::NoGradGuard no_grad;
  for (const auto& stage : stages) {
    for (auto& p : stage->parameters()) p.set_data(p.detach().to(torch::kBFloat16));
  }
}

void copy_adamw_state(const torch::optim::AdamW& from, const std::vector<torch::Tensor>& from_tensors,
                      torch::optim::AdamW& to, const std::vector<torch::Tensor>& to_tensors) {
  PPCTL_ASSERT(from_tensors.size() == to_tensors.size(), "AdamW state copied between lists of different lengths");
  for (size_t i = 0; i < from_tensors.size(); ++i) {
    const auto it = from.state().find(from_tensors[i].unsafeGetTensorImpl());
    if (it != from.state().end()) to.state()[to_tensors[i].unsafeGetTensorImpl()] = it->second->clone();
  }
}

namespace {

/// Every parameter of `stages`, stage by stage in parameters() order.
std::vector<torch::Tensor> all_parameters(const std::vector<model::StageModule>& stages) {
  std::vector<torch::Tensor> params;
  for (const auto& stage : stages)
    for (const auto& p : stage->parameters()) params.push_back(p);
  return params;
}

}  // namespace

SeatedWeights::SeatedWeights(const std::vector<model::StageModule>& stages, const std::vector<torch::Tensor>& weights) {
  if (weights.empty()) return;
  params_ = all_parameters(stages);
  PPCTL_ASSERT(params_.size() == weights.size(),
               fmt::format("{} weights seated in {} parameters", weights.size(), params_.size()));
  for (size_t i = 0; i < params_.size(); ++i) {
    own_.push_back(params_[i].data());
    params_[i].set_data(weights[i].detach());
  }
}

SeatedWeights::~SeatedWeights() {
  for (size_t i = 0; i < own_.size(); ++i) params_[i].set_data(own_[i]);
}

ReplicatedOptimizer::ReplicatedOptimizer(const std::vector<model::StageModule>& stages,
                                         const config::OptimizerSpec& spec, bool bf16_weights,
                                         const torch::optim::AdamW* loaded)
    : stages_(stages), spec_(spec), params_(all_parameters(stages)), copies_(bf16_weights) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& p : params_) {
    PPCTL_ASSERT(p.scalar_type() == torch::kFloat, "the optimizer starts from fp32 parameters");
    auto main = p;
    if (copies_) {
      main = p.detach().clone();  // fp32: what was initialised or loaded, unrounded
      main.mutable_grad() = p.grad();  // the fp32 gradient buffer's view (GradientBuffers), shared
    }
    (p.dim() >= 2 ? decay : no_decay).push_back(main);
    mains_.push_back(main);
  }
  local_ = make_adamw(std::move(decay), std::move(no_decay), spec);
  if (loaded != nullptr) copy_adamw_state(*loaded, params_, *local_, mains_);
  if (copies_) convert_weights_to_bf16(stages);
}

std::map<int64_t, std::vector<torch::Tensor>> ReplicatedOptimizer::owned_gradients() const {
  return stage_gradients(stages_);
}

void ReplicatedOptimizer::step() {
  local_->step();
  if (!copies_) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) params_[i].data().copy_(mains_[i]);  // rounded to nearest
}

CheckpointState ReplicatedOptimizer::checkpoint_state(const std::vector<model::StageModule>& stages) {
  if (!copies_) return {nullptr, local_.get(), {}};
  CheckpointState state;
  state.owned = make_optimizer(stages, spec_);
  copy_adamw_state(*local_, mains_, *state.owned, params_);
  state.optimizer = state.owned.get();
  state.weights = mains_;
  return state;
}

torch::Tensor ReplicatedOptimizer::stepped(const torch::Tensor& param) const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].is_same(param)) return mains_[i];
  return param;
}

int64_t ReplicatedOptimizer::main_parameter_bytes() const {
  int64_t bytes = 0;
  if (copies_)
    for (const auto& main : mains_) bytes += static_cast<int64_t>(main.nbytes());
  return bytes;
}

}  // namespace ppctl::optim
