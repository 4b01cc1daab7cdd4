// The optimizers of the step: AdamW over a rank's stages, and the distributed optimizer
// (optimizer.distributed): AdamW's state sharded over the data-parallel group, as Megatron-Core's
// DistributedOptimizer does it for fp32 parameters.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "config/job_spec.hpp"
#include "model/stage.hpp"
#include "runtime/param_gather.hpp"
#include "train/grad_buffers.hpp"

namespace ppctl::train {

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

/// AdamW over this replica's shard of every stage it holds (Megatron-Core's DistributedOptimizer:
/// megatron/core/optimizer/distrib_optimizer.py; its docs/source/api-guide/dist_optimizer.md).
/// Each stage's parameters are moved into one contiguous fp32 buffer laid out as its gradient
/// buffer (`gradients`, built with `shard` on), padded bucket by bucket to a multiple of dp; dp rank
/// r owns the r-th of the dp equal slices of each bucket. The gradients' reduce-scatter (started at
/// REDUCE_GRAD) leaves the mean gradient of exactly that slice here; step() runs
/// torch::optim::AdamW on the slice only (its pieces, one per parameter it touches, so that weight
/// decay still applies to matrices only) and then all-gathers each bucket of parameters in place,
/// so that every replica holds every updated weight, bitwise. Memory: weights 4 B + gradients 4 B
/// per parameter as before, AdamW's moments 8/dp B (16 -> 8 + 8/dp, Megatron's table).
///
/// The tied embedding copies are in no bucket: their gradients are all-reduced as without the
/// option, and each holder keeps their full AdamW state and steps them itself (small next to the
/// blocks; the same bits on every replica).
class DistributedOptimizer final : public runtime::ParameterGather {
 public:
  /// `stages`' parameters are re-seated (set_data) into the parameter buffers, values kept.
  /// `gradients` must have been built over the same stages with `shard` and `data_parallel`;
  /// `spec`: AdamW's hyper-parameters (make_optimizer's groups). `overlap` (runtime.overlap_param_gather):
  /// step() leaves the all-gathers in flight for ready() / wait_all(); otherwise it waits for them.
  DistributedOptimizer(const std::vector<model::StageModule>& stages, const GradientBuffers& gradients,
                       comm::Communicator& data_parallel, const config::OptimizerSpec& spec, bool overlap);

  /// The optimizer over this rank's shard pieces and tied copies (its param_groups carry the
  /// learning rate; its state the moments of the pieces held).
  torch::optim::AdamW& local() { return *local_; }
  const torch::optim::AdamW& local() const { return *local_; }

  /// The gradients this rank answers for in the global norm, by stage: its shard pieces' and,
  /// on dp rank 0 only, the tied copy of a stage without the head (the copy counts once, as in
  /// local_gradient_stats). Summed over the data-parallel group, they cover each gradient once.
  std::map<int64_t, std::vector<torch::Tensor>> owned_gradients() const;

  /// AdamW on the shard, then the in-place all-gather of every parameter bucket, posted stage by
  /// stage; waited for here unless `overlap` (bounded by the group's timeout, throwing as
  /// Communicator::wait does).
  void step();

  /// Waits for `stage`'s parameter all-gathers still in flight (nothing when none is).
  void ready(int64_t stage) override;
  /// Waits for every stage's: before anything but a forward reads the weights (a checkpoint, the
  /// run's end).
  void wait_all();

  /// Collective over the data-parallel group (every replica calls it): an AdamW over `stages`'
  /// parameters (make_optimizer) whose state holds the full moments, gathered bucket by bucket, on
  /// the CPU (for save_checkpoint's per-parameter format). Empty state before the first step.
  /// Waits for the parameter all-gathers first (wait_all).
  std::unique_ptr<torch::optim::AdamW> gather_state(const std::vector<model::StageModule>& stages);

  /// Takes this rank's shard of the moments from `full` (loaded by load_checkpoint over `stages`'
  /// parameters, whatever dp or option it was saved with): what gather_state would give back.
  void scatter_state(const torch::optim::AdamW& full, const std::vector<model::StageModule>& stages);

 private:
  struct Piece {
    torch::Tensor param;    // a stage parameter (to look its full state up)
    int64_t begin = 0;      // [begin, begin + numel) of the parameter's elements, flattened
    torch::Tensor tensor;   // that part of the parameter buffer, detached; .grad = the gradient's part
    int64_t bucket_offset;  // where it sits in its bucket's own slice
  };
  struct Bucket {
    torch::Tensor params;  // a view into the stage's parameter buffer
    int64_t offset = 0;    // in the stage's buffer
    std::vector<size_t> pieces;  // indices into pieces_
  };
  struct Stage {
    int64_t index = 0;
    bool has_head = false;
    torch::Tensor flat;  // the parameter buffer
    std::vector<int64_t> offsets;  // each parameter's offset in `flat` (StageBufferLayout::offsets)
    std::vector<Bucket> buckets;
    torch::Tensor tied;  // the tied copy, or undefined
  };

  comm::Communicator& data_parallel_;
  config::OptimizerSpec spec_;
  std::vector<Stage> stages_;
  std::vector<Piece> pieces_;
  std::unique_ptr<torch::optim::AdamW> local_;
  bool overlap_ = true;
  std::map<int64_t, std::vector<comm::PendingOp>> gathering_;  // by stage: all-gathers posted, not yet waited for
  int64_t steps_taken_ = 0;  // AdamW steps taken (skipped steps not counted), as AdamWParamState::step
};

}  // namespace ppctl::train
