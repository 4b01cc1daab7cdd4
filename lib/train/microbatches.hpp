// Turns the byte dataset into the microbatch tensors of a step or a held-out batch (shared by
// workers and the unpipelined reference, so both see exactly the same global batch).
#pragma once

#include "config/job_spec.hpp"
#include "data/dataset.hpp"
#include "runtime/executor.hpp"

namespace ppctl::train {

/// Microbatch j of data-parallel replica `replica` (of `replicas`) at optimizer step `step`: tokens
/// and targets [micro_batch_size, seq_len] int64 on the CPU, sequences
/// Dataset::stream_index(step, replica x m + j, i, replicas x m, mbs) for i < micro_batch_size.
/// The step's global batch is the replicas' microbatches one after another, so replicas see
/// disjoint samples and one process reading microbatches 0 .. replicas x m - 1 of a spec with
/// replicas x m microbatches sees the same global batch.
runtime::MicrobatchData microbatch(const data::Dataset& dataset, const config::JobSpec& spec,
                                   int64_t step, int64_t microbatch_index, int64_t replica = 0,
                                   int64_t replicas = 1);

/// A MicrobatchSource for `step` (and replica) reading from `dataset`; a source that throws if `dataset` is null
/// (ranks that hold neither the first nor the last stage never ask for data).
runtime::MicrobatchSource microbatch_source(const data::Dataset* dataset,
                                            const config::JobSpec& spec, int64_t step,
                                            int64_t replica = 0, int64_t replicas = 1);

/// Microbatch j of held-out global batch `batch` (0 <= batch < eval.batches) for replica
/// `replica` of `replicas`: the held-out sequences Dataset::eval_sample(stream_index(batch,
/// replica x m + j, i, replicas x m, mbs)), the same at every evaluation. Asserts that `dataset`
/// is not null when called.
runtime::MicrobatchSource eval_microbatch_source(const data::Dataset* dataset,
                                                 const config::JobSpec& spec, int64_t batch,
                                                 int64_t replica = 0, int64_t replicas = 1);

}  // namespace ppctl::train
