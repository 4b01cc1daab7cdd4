// Turns the byte dataset into the microbatch tensors of a step or a held-out batch (shared by
// workers and the unpipelined reference, so both see exactly the same global batch).
#pragma once

#include "config/job_spec.hpp"
#include "data/dataset.hpp"
#include "runtime/executor.hpp"

namespace ppctl::train {

/// Microbatch j of data-parallel replica `replica` (of `replicas`) at optimizer step `step`: tokens
/// and targets [micro_batch_size, seq_len] int64 on the CPU (with a chat dataset also the target mask,
/// positions and documents: runtime::MicrobatchData), sequences
/// Dataset::stream_index(step, replica x m + j, i, replicas x m, mbs) for i < micro_batch_size.
/// The step's global batch is the replicas' microbatches one after another, so replicas see
/// disjoint samples and one process reading microbatches 0 .. replicas x m - 1 of a spec with
/// replicas x m microbatches sees the same global batch.
runtime::MicrobatchData microbatch(const data::Dataset& dataset, const config::JobSpec& spec,
                                   int64_t step, int64_t microbatch_index, int64_t replica = 0,
                                   int64_t replicas = 1);

/// A MicrobatchSource for `step` (and replica) reading from `dataset`; with `dataset` null (a rank holding only
/// middle stages of unpacked data, which needs nothing) one that returns empty microbatches.
runtime::MicrobatchSource microbatch_source(const data::Dataset* dataset,
                                            const config::JobSpec& spec, int64_t step,
                                            int64_t replica = 0, int64_t replicas = 1);

/// Microbatch j of held-out global batch `batch` (0 <= batch < eval.batches) for replica
/// `replica` of `replicas`: the held-out sequences Dataset::eval_sample(stream_index(batch,
/// replica x m + j, i, replicas x m, mbs)), the same at every evaluation. Empty microbatches when `dataset`
/// is null.
runtime::MicrobatchSource eval_microbatch_source(const data::Dataset* dataset,
                                                 const config::JobSpec& spec, int64_t batch,
                                                 int64_t replica = 0, int64_t replicas = 1);

/// The target tokens of step `step`'s global batch over `replicas` replicas (every microbatch of every replica):
/// the denominator of the step's per-token loss. replicas x m x mbs x seq_len without a chat dataset (or without
/// a dataset: nothing is read); with one, the sum of the windows' target masks (data::Dataset::sample_targets),
/// which every rank holding the last stage computes alike without communication.
int64_t step_target_tokens(const data::Dataset* dataset, const config::JobSpec& spec, int64_t step,
                           int64_t replicas);

/// The factor each microbatch's loss sum is multiplied by before its backward: replicas / target_tokens (1 /
/// target_tokens summed over the replicas, whose gradients are then averaged), so the gradient is that of the
/// global per-token mean loss. A step without targets (target_tokens 0) gets replicas: its loss sums are 0.
double loss_scale(int64_t target_tokens, int64_t replicas);

}  // namespace ppctl::train
