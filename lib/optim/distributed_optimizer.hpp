// The distributed optimizer (optimizer.distributed): AdamW's state and the fp32 main parameters sharded
// over the data-parallel group, as Megatron-Core's DistributedOptimizer does it, for fp32 or bf16 weights.
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
#include "optim/grad_buffers.hpp"
#include "optim/optimizer.hpp"

namespace ppctl::optim {

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
/// With `bf16_weights` (runtime.precision bf16-params) the parameter buffer is bf16 and the fp32 main
/// parameters exist only as this replica's slice of each bucket, taken from the fp32 parameters at
/// construction: AdamW steps the fp32 slice, which is rounded into the bf16 buffer's slice, and the
/// bf16 buckets are all-gathered (half the bytes of fp32). Memory: weights 2 B + gradients 4 B +
/// (main parameters 4 B + moments 8 B) / dp = Megatron's 6 + 12/dp.
///
/// The tied embedding copies are in no bucket: their gradients are all-reduced as without the
/// option, and each holder keeps their full AdamW state (and fp32 main copy) and steps them itself
/// (small next to the blocks; the same bits on every replica).
class DistributedOptimizer final : public StepOptimizer, public runtime::ParameterGather {
 public:
  /// `stages`' parameters (fp32) are re-seated (set_data) into the parameter buffers, values kept
  /// (rounded to bf16 with `bf16_weights`). `gradients` must have been built over the same stages
  /// with `shard` and `data_parallel`; `spec`: AdamW's hyper-parameters (make_optimizer's groups).
  /// `overlap` (runtime.overlap_param_gather): step() leaves the all-gathers in flight for ready() /
  /// wait_all(); otherwise it waits for them. `loaded`: an AdamW over `stages`' parameters holding a
  /// checkpoint's full moments (whatever dp or option it was saved with), of which this replica
  /// keeps its shard; null for a fresh start.
  DistributedOptimizer(const std::vector<model::StageModule>& stages, const GradientBuffers& gradients,
                       comm::Communicator& data_parallel, const config::OptimizerSpec& spec, bool overlap,
                       bool bf16_weights, const torch::optim::AdamW* loaded);

  /// The optimizer over this rank's shard pieces and tied copies (its param_groups carry the
  /// learning rate; its state the moments of the pieces held).
  torch::optim::AdamW& local() override { return *local_; }

  /// The gradients this rank answers for in the global norm, by stage: its shard pieces' and,
  /// on dp rank 0 only, the tied copy of a stage without the head (the copy counts once, as in
  /// local_gradient_stats); at t > 1 a replicated parameter's pieces on tp rank 0 only. Summed over the
  /// data-parallel and tensor-parallel groups, they cover each gradient once.
  std::map<int64_t, std::vector<torch::Tensor>> owned_gradients() const override;

  /// AdamW on the shard, then the in-place all-gather of every parameter bucket, posted stage by
  /// stage; waited for here unless `overlap` (bounded by the group's timeout, throwing as
  /// Communicator::wait does).
  void step() override;

  /// Waits for `stage`'s parameter all-gathers still in flight (nothing when none is).
  bool ready(int64_t stage) override;
  /// Waits for every stage's: before anything but a forward reads the weights (a checkpoint, the
  /// run's end).
  void wait_all() override;

  /// Collective over the data-parallel group (every replica calls it): an AdamW over `stages`'
  /// parameters (make_optimizer) whose state holds the full moments, gathered bucket by bucket, on
  /// the CPU (for save_checkpoint's per-parameter format; empty state before the first step), and
  /// with bf16 weights the fp32 main parameters gathered the same way. Waits for the parameter
  /// all-gathers first (wait_all).
  CheckpointState checkpoint_state(const std::vector<model::StageModule>& stages) override;
  torch::Tensor stepped(const torch::Tensor& param) const override;
  int64_t main_parameter_bytes() const override;

 private:
  struct Piece {
    torch::Tensor param;    // a stage parameter (to look its full state up)
    int64_t begin = 0;      // [begin, begin + numel) of the parameter's elements, flattened
    torch::Tensor tensor;   // that part of the bucket's fp32 main slice, detached; .grad = the gradient's part
    int64_t bucket_offset;  // where it sits in its bucket's own slice
    bool counted = true;    // in owned_gradients: false for a replicated parameter on tp rank > 0
  };
  struct Bucket {
    torch::Tensor params;  // a view into the stage's parameter buffer
    int64_t offset = 0;    // in the stage's buffer
    torch::Tensor main;    // this replica's slice of the fp32 main parameters: a view into `params`
                           // (fp32 weights) or a tensor of its own (bf16 weights)
    std::vector<size_t> pieces;  // indices into pieces_
  };
  struct Stage {
    int64_t index = 0;
    bool has_head = false;
    torch::Tensor flat;  // the parameter buffer
    std::vector<int64_t> offsets;  // each parameter's offset in `flat` (StageBufferLayout::offsets)
    std::vector<Bucket> buckets;
    torch::Tensor tied;       // the tied copy, or undefined
    torch::Tensor tied_main;  // what AdamW steps for it: `tied`, or its fp32 main copy
  };
  /// With bf16 weights, the fp32 main parameters of every bucket gathered whole, on the CPU, per
  /// parameter in `stages` order (the tied copies' mains included); empty with fp32 weights.
  std::vector<torch::Tensor> gather_main_weights(const std::vector<model::StageModule>& stages);

  comm::Communicator& data_parallel_;
  config::OptimizerSpec spec_;
  std::vector<Stage> stages_;
  std::vector<Piece> pieces_;
  std::unique_ptr<torch::optim::AdamW> local_;
  bool overlap_ = true;
  bool bf16_weights_ = false;
  std::map<int64_t, std::vector<comm::PendingOp>> gathering_;  // by stage: all-gathers posted, not yet waited for
  int64_t steps_taken_ = 0;  // AdamW steps taken (skipped steps not counted), as AdamWParamState::step
};

}  // namespace ppctl::optim
