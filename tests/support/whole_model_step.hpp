// Test support: one training step of a whole GPT as one stage, run by the executor on the calling
// thread (no workers, no communicator), GPipe order: every forward before any backward.
#pragma once

#include <cstdint>

#include "config/job_spec.hpp"
#include "model/stage.hpp"
#include "runtime/executor.hpp"

namespace ppctl::test {

/// What one step left: the executor's result and the stage, whose parameters hold the gradients.
struct WholeModelStep {
  runtime::StepResult result;
  model::StageModule stage;
};

/// One step of `model` (seed 5) over `microbatches` microbatches of `micro_batch_size` random token
/// sequences (seeded per microbatch), with one intra-op thread and the given recomputation. The loss
/// sums are scaled by 1 / the step's tokens (the mean over the batch); `gather`, when given, is the executor's ParameterGather (asked before each
/// forward). Throws what the executor throws.
WholeModelStep whole_model_step(const config::ModelSpec& model, int64_t microbatches, int64_t micro_batch_size,
                                runtime::RecomputePolicy recompute = {}, runtime::ParameterGather* gather = nullptr);

}  // namespace ppctl::test
