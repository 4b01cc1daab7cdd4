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
#include "runtime/grad_reduction.hpp"

namespace ppctl::train {

/// Parameters per gradient bucket: `configured` (runtime.grad_bucket_size) when > 0, else
/// Megatron-Core's default max(40M, 1M x dp) (DistributedDataParallelConfig.bucket_size).
int64_t bucket_size_of(int64_t configured, int64_t dp_size);

/// Splits parameters of `numels` elements (in buffer order) into buckets of whole parameters:
/// a bucket closes once it holds at least `bucket_size` elements, so every bucket but the last
/// reaches it and a parameter larger than a bucket is a bucket of its own. Returns [begin, end)
/// parameter index ranges covering all of them in order (none for no parameters).
/// Throws ppctl::Error when bucket_size < 1.
std::vector<std::pair<size_t, size_t>> bucket_ranges(const std::vector<int64_t>& numels, int64_t bucket_size);

/// One rank's gradients: per stage one contiguous fp32 buffer on the parameters' device, whose
/// views are the parameters' .grad (autograd accumulates into them in place), reduced over the
/// data-parallel group in buckets (Megatron-Core's param_and_grad_buffer: contiguous buffer,
/// buckets, overlap_grad_reduce). start(stage) posts the stage's bucket all-reduces without
/// waiting; finish() starts the stages not yet started and waits for all, then divides by the
/// group's size: each replica then holds the gradient of the mean loss over the global batch,
/// bitwise identical on every replica. No full-size temporary is made: every collective is in place.
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
  /// Replaces every parameter's .grad with a zeroed view into its stage's buffer.
  GradientBuffers(const std::vector<model::StageModule>& stages, comm::Communicator* data_parallel,
                  comm::Communicator* tied_group, int64_t bucket_size);

  /// Zeroes every buffer (the step's start, or a skipped step). Asserts that every .grad is still a
  /// view into its buffer (something replacing it would silently escape the reduction).
  void zero();
  void start(int64_t stage) override;
  void finish() override;
  void poll() override;
  std::vector<Span> spans() const override;

  /// Buckets of `stage` (0 for a stage this rank does not hold).
  size_t num_buckets(int64_t stage) const;
  /// Bytes of all buffers (4 B per parameter held).
  int64_t bytes() const;

 private:
  struct Bucket {
    torch::Tensor flat;  // a view into the stage's buffer
    comm::PendingOp op;
    bool posted = false;  // posted and not yet seen complete
  };
  struct StageBuffer {
    torch::Tensor flat;                 // [parameters of the stage], fp32
    std::vector<torch::Tensor> params;  // whose .grad are views into `flat`
    std::vector<Bucket> buckets;
    torch::Tensor tied;                 // the tied copy's weight, or undefined
    bool started = false;
    Span span;                          // of the latest step
    bool done = false;                  // every bucket seen complete (span.end set)
  };
  /// Whether every posted collective of `buffer` has completed: polls (`wait` false) or waits.
  bool settle(StageBuffer& buffer, bool wait);
  void start_tied();

  comm::Communicator* data_parallel_;
  comm::Communicator* tied_group_;
  std::map<int64_t, StageBuffer> stages_;
  comm::PendingOp tied_op_;
  bool tied_posted_ = false;
  bool tied_reduced_ = false;  // the last finished step reduced the tied copies over a group
};

}  // namespace ppctl::train
