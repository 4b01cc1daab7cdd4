// The executor's view of the distributed optimizer's parameter all-gather: the forward of a stage waits
// for that stage's updated parameters. Implemented by train::DistributedOptimizer; no torch here.
#pragma once

#include <cstdint>

namespace ppctl::runtime {

/// The updated parameters arriving from the other data-parallel replicas after an optimizer step
/// (Megatron-Core's distributed optimizer with overlap_param_gather: the all-gather of a bucket
/// runs while earlier work goes on, and a module's forward waits for its own buckets). The executor
/// calls ready(stage) before each forward of the stage (F, also in forward-only runs) and after its
/// input has arrived, so the gather runs under the receive wait and the stages before it.
class ParameterGather {
 public:
  virtual ~ParameterGather() = default;
  /// Returns once every parameter of `stage` holds this step's values: waits for the stage's
  /// all-gathers still in flight (bounded by the group's timeout; throws ppctl::CommTimeout /
  /// ppctl::CommError as Communicator::wait does). Returns whether any was in flight (false: the
  /// call only looked, nothing to wait for). Cheap when nothing is in flight.
  virtual bool ready(int64_t stage) = 0;
};

}  // namespace ppctl::runtime
