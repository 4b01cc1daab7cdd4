// The executor's view of the data-parallel gradient reduction: started per stage by REDUCE_GRAD
// actions, finished after the schedule. Implemented by train::GradientBuffers; no torch here.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

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

  /// One stage's reduction in the step just finished, on the steady clock: from start() (or from
  /// finish() for a stage it started) to when its last collective was seen complete.
  struct Span {
    int64_t stage = 0;
    std::chrono::steady_clock::time_point start, end;
  };
  /// Never blocks: notes which started collectives have completed (the executor calls it between
  /// actions), so that a span ends when the work ended, not when finish() looked.
  virtual void poll() = 0;
  /// After finish(): the spans of the step (for the trace), one per stage held that ran a
  /// collective (none at dp 1, except the stages holding a tied copy reduced over a group).
  virtual std::vector<Span> spans() const = 0;
};

}  // namespace ppctl::runtime
