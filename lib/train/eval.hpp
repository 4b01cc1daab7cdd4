// Evaluation on the held-out split: the eval loss over eval.batches global batches, forward only.
#pragma once

#include <optional>

#include "config/job_spec.hpp"
#include "data/text_dataset.hpp"
#include "runtime/executor.hpp"
#include "schedule/action.hpp"

namespace ppctl::train {

/// True when an evaluation is due after optimizer step `done` (counted from 1) of `total`:
/// every eval.interval steps and after the last, never when eval.interval is 0.
bool eval_due(const config::EvalSpec& eval, int64_t done, int64_t total);

/// Collective over the pipeline: every rank runs the forward half of its `actions`
/// (Executor::run_forward_only) on each of the spec.eval.batches held-out global batches
/// (eval_microbatch_source). Returns the mean loss over all held-out microbatches (nats per byte)
/// on the rank holding the last stage, std::nullopt elsewhere. `dataset` may be null on ranks
/// holding neither the first nor the last stage.
std::optional<double> evaluate(runtime::Executor& executor, const schedule::RankProgram& actions,
                               const data::TextDataset* dataset, const config::JobSpec& spec);

}  // namespace ppctl::train
