// Contiguous gradient buffers per stage, split into buckets, and the data-parallel reduction that
// REDUCE_GRAD actions start: asynchronous in-place all-reduces per bucket, averaged after the wait.
// The tied embedding's sum over its copies is one more collective of the same kind.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "model/stage.hpp"
#include "model/tensor_parallel.hpp"
#include "runtime/grad_reduction.hpp"

namespace ppctl::optim {

/// Parameters per gradient bucket: `configured` (runtime.grad_bucket_size) when > 0, else
/// Megatron-Core's default max(40M, 1M x dp) (DistributedDataParallelConfig.bucket_size).
int64_t bucket_size_of(int64_t configured, int64_t dp_size);

/// Splits parameters of `numels` elements (in buffer order) into buckets of whole parameters:
/// a bucket closes once it holds at least `bucket_size` elements, so every bucket but the last
/// reaches it and a parameter larger than a bucket is a bucket of its own. Returns [begin, end)
/// parameter index ranges covering all of them in order (none for no parameters).
/// Throws ppctl::Error when bucket_size < 1.
std::vector<std::pair<size_t, size_t>> bucket_ranges(const std::vector<int64_t>& numels, int64_t bucket_size);

/// Where one stage's parameters sit in its contiguous buffers (the gradient buffer here, and the
/// distributed optimizer's parameter buffer, laid out alike), in elements.
struct StageBufferLayout {
  int64_t numel = 0;             ///< the buffer's length, padding included
  std::vector<int64_t> offsets;  ///< per parameter, in stage->parameters() order
  /// [offset, offset + numel) of each bucket. Sharded (GradientBuffers' `shard`): each bucket's
  /// numel is padded up to a multiple of dp, and dp rank r owns the r-th of its dp equal slices.
  std::vector<std::pair<int64_t, int64_t>> buckets;
  int64_t tied_index = -1;  ///< the tied copy's parameter index (in no bucket), or -1
};

/// The layout of parameters of `numels` elements (in order; `tied_index` the tied copy, or -1):
/// parameters back to back, the runs of parameters around the tied copy each split into buckets
/// by bucket_ranges, each bucket's end padded to a multiple of `pad_to` (1 = none). Megatron-Core's
/// param_and_grad_buffer pads its buckets to a multiple of dp for the same reason: equal shards.
StageBufferLayout stage_buffer_layout(const std::vector<int64_t>& numels, int64_t tied_index, int64_t bucket_size,
                                      int64_t pad_to);

/// One rank's gradients: per stage one contiguous fp32 buffer on the parameters' device, whose
/// views are the parameters' .grad (autograd accumulates into them in place), also for bf16
/// parameters (runtime.precision bf16-params): autograd's AccumulateGrad adds each bf16 gradient
/// into the fp32 .grad in place, which makes the buffer Megatron-Core's fp32 `main_grad` without a
/// hook. Reduced over the
/// data-parallel group in buckets (Megatron-Core's param_and_grad_buffer: contiguous buffer,
/// buckets, overlap_grad_reduce). start(stage) posts the stage's bucket all-reduces without
/// waiting; finish() starts the stages not yet started and waits for all, then divides by the
/// group's size: each replica then holds the gradient of the mean loss over the global batch,
/// bitwise identical on every replica. No full-size temporary is made: every collective is in place.
///
/// Tensor parallelism: start(stage) first sums the stage's partial gradients (model::gradient_is_partial: under
/// sequence parallelism the norms', row-parallel biases' and positions' from this rank's positions; qwen3's q_norm
/// and k_norm from its heads) over the stage's tensor-parallel group, in one all-reduce per stage and step, as
/// Megatron-Core's finalize_model_grads does, before the data-parallel reduction sees them.
///
/// Tied embeddings (model::StageModuleImpl::tied_weight): the copies are not in any bucket. Once
/// every stage on this rank that holds a copy has started, the local copies are summed into the
/// first and that sum is all-reduced over `tied_group` (every rank holding the first or the last
/// stage, in every replica), or over the data-parallel group when this rank holds both stages;
/// finish() divides it by dp and writes it into every local copy. Both copies, in every replica,
/// then hold the same bits: the sum over the copies of the replicas' mean, as one shared weight's
/// gradient (Press & Wolf, arXiv 1608.05859; Megatron-LM's embedding group).
class GradientBuffers final : public runtime::GradientReduction {
 public:
  /// `data_parallel`: null when dp = 1 (nothing to average). `tied_group`: null unless the tied
  /// copies live on two pipeline ranks. `bucket_size`: parameters per bucket (bucket_size_of).
  /// `shard` (optimizer.distributed, with `data_parallel`): buckets padded to a multiple of dp and
  /// reduce-scattered instead of all-reduced (Megatron-Core's distributed optimizer): after
  /// finish() only this replica's shard of each bucket (shard_of) holds the mean; the rest of the
  /// bucket holds this replica's own sum, unreduced. The tied copies are all-reduced either way.
  /// Replaces every parameter's .grad with a zeroed view into its stage's buffer.
  GradientBuffers(const std::vector<model::StageModule>& stages, comm::Communicator* data_parallel,
                  comm::Communicator* tied_group, int64_t bucket_size, bool shard = false);

  /// Zeroes every buffer (the step's start, or a skipped step). Asserts that every .grad is still a
  /// view into its buffer (something replacing it would silently escape the reduction).
  void zero();
  void start(int64_t stage) override;
  void finish() override;
  void poll() override;
  std::vector<Span> spans() const override;

  /// Buckets of `stage` (0 for a stage this rank does not hold).
  size_t num_buckets(int64_t stage) const;
  /// Whether the buckets are reduce-scattered (the constructor's `shard` with a data-parallel group).
  bool sharded() const { return shard_; }
  /// The layout of `stage`'s buffer, and the buffer ([layout.numel] fp32). Throws ppctl::InternalError for a
  /// stage this rank does not hold.
  const StageBufferLayout& layout(int64_t stage) const;
  torch::Tensor buffer(int64_t stage) const;
  /// Multiplies every gradient by `factor` (clipping), in place.
  void scale(double factor);
  /// Sharded only, after finish(): all-gathers every bucket's reduced shards in place, so that every
  /// .grad holds the mean over the replicas, as unsharded (for the gradient dump of the parity
  /// tests; a step does not need it). Waits; bounded by the group's timeout.
  void gather_shards();
  /// Bytes of all buffers (4 B per parameter held).
  int64_t bytes() const;

 private:
  struct Bucket {
    torch::Tensor flat;  // a view into the stage's buffer
    torch::Tensor own;   // the part whose reduction this rank keeps: `flat`, or its shard when sharded
    comm::PendingOp op;
    bool posted = false;  // posted and not yet seen complete
  };
  struct StageBuffer {
    torch::Tensor flat;                 // [layout.numel], fp32
    StageBufferLayout layout;
    std::vector<torch::Tensor> params;  // whose .grad are views into `flat`
    std::vector<Bucket> buckets;
    torch::Tensor tied;                 // the tied copy's weight, or undefined
    model::TensorParallel tp;           // the stage's tensor-parallel group
    std::vector<torch::Tensor> partial;  // .grad of the parameters whose gradient is partial over `tp`
    bool started = false;
    Span span;                          // of the latest step
    bool done = false;                  // every bucket seen complete (span.end set)
  };
  /// Whether every posted collective of `buffer` has completed: polls (`wait` false) or waits.
  bool settle(StageBuffer& buffer, bool wait);
  void start_tied();

  comm::Communicator* data_parallel_;
  comm::Communicator* tied_group_;
  bool shard_ = false;
  std::map<int64_t, StageBuffer> stages_;
  comm::PendingOp tied_op_;
  bool tied_posted_ = false;
  bool tied_reduced_ = false;  // the last finished step reduced the tied copies over a group
};

}  // namespace ppctl::optim
