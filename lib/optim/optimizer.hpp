// The optimizer of the training step behind one interface: AdamW over fp32 main parameters, whole on
// every replica (ReplicatedOptimizer, here) or sharded over the data-parallel group
// (DistributedOptimizer, optim/distributed_optimizer.hpp); the main parameters are the weights
// themselves, or fp32 copies of bf16 weights (runtime.precision bf16-params).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "config/job_spec.hpp"
#include "model/stage.hpp"

namespace ppctl::optim {

/// AdamW (torch::optim::AdamW) over `decay` and `no_decay` with `spec`'s hyper-parameters, weight
/// decay on the first group only.
std::unique_ptr<torch::optim::AdamW> make_adamw(std::vector<torch::Tensor> decay, std::vector<torch::Tensor> no_decay,
                                                const config::OptimizerSpec& spec);

/// AdamW as torch::optim::AdamW over the stages' parameters; weight decay on matrices (dim >= 2)
/// only, not on biases and LayerNorm gains (as GPT-2/Megatron do).
std::unique_ptr<torch::optim::AdamW> make_optimizer(const std::vector<model::StageModule>& stages,
                                                    const config::OptimizerSpec& spec);

/// Bytes of AdamW state `optimizer` holds: both moments of every parameter it has stepped (none
/// before the first step).
int64_t adamw_state_bytes(const torch::optim::AdamW& optimizer);

/// Converts every parameter of `stages` to bf16 in place (set_data: the same parameter objects, so
/// that module code and autograd keep seeing them), rounding to nearest. Their .grad are left alone
/// (fp32 views into the gradient buffers stay fp32: Megatron-Core's main_grad).
void convert_weights_to_bf16(const std::vector<model::StageModule>& stages);

/// What a checkpoint writes for one rank (checkpoint::save_checkpoint's per-parameter format, the same in
/// every precision and sharding): `optimizer`, an AdamW over exactly the stages' parameters holding
/// their full moments, and the fp32 weights.
struct CheckpointState {
  std::unique_ptr<torch::optim::AdamW> owned;  ///< `optimizer` when it was made for the checkpoint
  const torch::optim::AdamW* optimizer = nullptr;
  /// The fp32 main parameters to write in place of the stages' parameters (stage by stage, in
  /// parameters() order), for SeatedWeights; empty when the parameters are the fp32 weights.
  std::vector<torch::Tensor> weights;
};

/// While alive, the parameters of `stages` (stage by stage, parameters() order) hold `weights`
/// (set_data), so that code reading the stages reads them (a checkpoint of fp32 main parameters
/// under bf16 weights); the parameters' own data comes back on destruction. Empty `weights`: nothing.
class SeatedWeights {
 public:
  SeatedWeights(const std::vector<model::StageModule>& stages, const std::vector<torch::Tensor>& weights);
  ~SeatedWeights();
  SeatedWeights(const SeatedWeights&) = delete;
  SeatedWeights& operator=(const SeatedWeights&) = delete;

 private:
  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> own_;  // each parameter's own data while seated
};

/// The training step's optimizer as the loop sees it.
class StepOptimizer {
 public:
  virtual ~StepOptimizer() = default;
  /// The torch AdamW that steps on this rank: its param_groups carry the learning rate, its state
  /// the moments held here.
  virtual torch::optim::AdamW& local() = 0;
  /// The gradients this rank answers for in the global norm, by global stage; summed over the
  /// data-parallel group (sharded) or taken from one replica (replicated), each gradient counts once.
  virtual std::map<int64_t, std::vector<torch::Tensor>> owned_gradients() const = 0;
  /// AdamW on the main parameters, then the weights the stages compute with brought up to date.
  virtual void step() = 0;
  /// Waits for parameter updates still in flight (the distributed optimizer's all-gathers).
  virtual void wait_all() {}
  /// Collective over the data-parallel group when sharded (every replica calls it): the state a
  /// checkpoint writes. Waits for updates in flight first.
  virtual CheckpointState checkpoint_state(const std::vector<model::StageModule>& stages) = 0;
  /// The tensor local() steps for `param`, a parameter whose whole state this rank keeps (a tied
  /// embedding copy): `param` itself, or its fp32 main copy.
  virtual torch::Tensor stepped(const torch::Tensor& param) const = 0;
  /// Bytes of fp32 main parameters kept beside bf16 weights on this rank (0 when the weights are fp32).
  virtual int64_t main_parameter_bytes() const = 0;
};

/// AdamW over every parameter of the rank's stages, the same on every replica. With `bf16_weights`
/// (runtime.precision bf16-params) it keeps an fp32 main copy of each parameter, taken from the
/// parameters' values at construction, converts the parameters to bf16 (convert_weights_to_bf16), steps
/// the main copies (their .grad: the parameters' fp32 .grad, the same tensors) and rounds them into
/// the bf16 parameters after each step: Megatron-Core's Float16OptimizerWithFloat16Params
/// (megatron/core/optimizer/optimizer.py), 18 B per parameter. Without it, AdamW steps the fp32
/// parameters themselves (16 B). `loaded`: an AdamW over `stages`' parameters holding a checkpoint's
/// state (make_optimizer, then load_checkpoint), whose moments this one takes; null for a fresh start.
class ReplicatedOptimizer final : public StepOptimizer {
 public:
  ReplicatedOptimizer(const std::vector<model::StageModule>& stages, const config::OptimizerSpec& spec,
                      bool bf16_weights, const torch::optim::AdamW* loaded);

  torch::optim::AdamW& local() override { return *local_; }
  std::map<int64_t, std::vector<torch::Tensor>> owned_gradients() const override;
  void step() override;
  CheckpointState checkpoint_state(const std::vector<model::StageModule>& stages) override;
  torch::Tensor stepped(const torch::Tensor& param) const override;
  int64_t main_parameter_bytes() const override;

 private:
  std::vector<model::StageModule> stages_;
  config::OptimizerSpec spec_;
  std::vector<torch::Tensor> params_;  // every parameter of the stages, in order
  std::vector<torch::Tensor> mains_;   // their fp32 main copies, or the parameters themselves
  bool copies_ = false;
  std::unique_ptr<torch::optim::AdamW> local_;
};

/// Copies the AdamW state of `from`'s tensors into `to`'s: to_tensors[i] gets from_tensors[i]'s
/// entry (shallow: the moments are shared), where `from` has one. Both lists the same length.
void copy_adamw_state(const torch::optim::AdamW& from, const std::vector<torch::Tensor>& from_tensors,
                      torch::optim::AdamW& to, const std::vector<torch::Tensor>& to_tensors);

}  // namespace ppctl::optim
