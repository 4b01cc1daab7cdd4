// Turns the byte dataset into the microbatch tensors of one step (shared by workers and the
// unpipelined reference, so both see exactly the same global batch).
#pragma once

#include "config/job_spec.hpp"
#include "data/text_dataset.hpp"
#include "runtime/executor.hpp"

namespace ppctl::train {

/// Microbatch j of optimizer step `step`: tokens and targets [micro_batch_size, seq_len] int64 on
/// the CPU, sequences TextDataset::stream_index(step, j, i, m, mbs) for i < micro_batch_size.
runtime::MicrobatchData microbatch(const data::TextDataset& dataset, const config::JobSpec& spec,
                                   int64_t step, int64_t microbatch_index);

/// A MicrobatchSource for `step` reading from `dataset`; a source that throws if `dataset` is null
/// (ranks that hold neither the first nor the last stage never ask for data).
runtime::MicrobatchSource microbatch_source(const data::TextDataset* dataset,
                                            const config::JobSpec& spec, int64_t step);

/// Microbatch j of held-out global batch `batch` (0 <= batch < eval.batches): the held-out
/// sequences TextDataset::eval_sample(stream_index(batch, j, i, m, mbs)), the same at every
/// evaluation. Asserts that `dataset` is not null when called.
runtime::MicrobatchSource eval_microbatch_source(const data::TextDataset* dataset,
                                                 const config::JobSpec& spec, int64_t batch);

}  // namespace ppctl::train
