// The executor's view of the data-parallel gradient reduction: started per stage by REDUCE_GRAD
// actions, finished after the schedule. Implemented by train::GradientBuffers; no torch here.
#pragma once

#include <cstdint>

namespace ppctl::runtime {

/// What REDUCE_GRAD actions drive (torch.distributed.pipelining's REDUCE_GRAD; Megatron-Core's
/// overlap_grad_reduce). The executor calls start(stage) at the stage's REDUCE_GRAD, when every
/// backward of that stage in the step is done, and finish() once after the schedule's last action,
/// before it returns (so before the optimizer step).
class GradientReduction {
 public:
  virtual ~GradientReduction() = default;
  /// Starts the stage's asynchronous collectives; returns without waiting for them. Called at most
  /// once per stage and step, in the rank's action order (the same on every replica).
  virtual void start(int64_t stage) = 0;
  /// Starts the reduction of every stage that start() was not called for this step, then waits for
  /// all of them (each bounded by its communicator's timeout; throws ppctl::CommTimeout /
  /// ppctl::CommError as Communicator::wait does). Afterwards every gradient is reduced.
  virtual void finish() = 0;
};

}  // namespace ppctl::runtime
