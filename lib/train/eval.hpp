// Evaluation on the held-out split: the eval loss over eval.batches global batches, forward only.
#pragma once

#include <optional>

#include "comm/communicator.hpp"
#include "config/job_spec.hpp"
#include "data/dataset.hpp"
#include "runtime/executor.hpp"
#include "schedule/action.hpp"

namespace ppctl::train {

/// True when an evaluation is due after optimizer step `done` (counted from 1) of `total`:
/// every eval.interval steps and after the last, never when eval.interval is 0.
bool eval_due(const config::EvalSpec& eval, int64_t done, int64_t total);

/// Collective over the pipeline (and, on the last stage, over `data_parallel`): every rank runs
/// the forward half of its `actions` (Executor::run_forward_only) on replica `replica`'s share of
/// each of the spec.eval.batches held-out global batches (eval_microbatch_source). Returns the mean
/// loss over every held-out microbatch of every replica (nats per byte; the last stage's replicas
/// sum their losses in one all-reduce over `data_parallel` when it is not null) on the ranks
/// holding the last stage, std::nullopt elsewhere. `dataset` may be null on ranks holding neither
/// the first nor the last stage.
std::optional<double> evaluate(runtime::Executor& executor, const schedule::RankProgram& actions,
                               const data::Dataset* dataset, const config::JobSpec& spec,
                               int64_t replica = 0, int64_t replicas = 1,
                               comm::Communicator* data_parallel = nullptr);

}  // namespace ppctl::train
