// The step loop: zero gradients, run the schedule, check and clip the global gradient norm, set
// the step's learning rate, AdamW step, log loss / lr / grad norm / tokens/s / step time.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <utility>
#include <string>

#include "comm/communicator.hpp"
#include "comm/progress_board.hpp"
#include "config/job_spec.hpp"
#include "data/dataset.hpp"
#include "model/stage.hpp"
#include "observe/observer.hpp"
#include "runtime/executor.hpp"
#include "train/fault_injection.hpp"
#include "optim/optimizer.hpp"

namespace ppctl::train {

/// Everything the loop needs on one rank.
struct LoopContext {
  const config::JobSpec& spec;
  const schedule::Program& program;
  int rank = 0;
  runtime::Executor& executor;
  std::vector<model::StageModule> stages;  ///< this rank's stages (their parameters are optimised)
  data::Dataset* dataset;    ///< null unless this rank holds the first or last stage
  int64_t steps = 0;                   ///< optimizer steps to run
  std::string dump_gradients_dir;      ///< see WorkerOptions
  comm::Communicator* comm = nullptr;  ///< the pipeline's ranks; null when the job has one rank
  std::optional<NanInjection> inject_nan;  ///< testing: see WorkerOptions
  observe::RunObserver* observer = nullptr;  ///< told about every step (trace, metrics, progress); may be null
  std::string resume_from;  ///< a checkpoint folder (resolve_checkpoint'ed) to continue from; empty = start afresh
  /// Testing: (step, files): SIGKILL after writing this many files of step's checkpoint.
  std::optional<std::pair<int64_t, int64_t>> crash_in_checkpoint;
  comm::Communicator* data_parallel = nullptr;  ///< this stage's replicas; null when dp = 1
  int64_t dp_rank = 0;     ///< this rank's replica (data-parallel rank), in [0, dp_size)
  int64_t dp_size = 1;     ///< data-parallel size dp
  comm::Communicator* tensor_parallel = nullptr;  ///< this stage's tensor-parallel ranks; null when t = 1
  int64_t tp_rank = 0;     ///< this rank's place in it: rank 0 of each group logs and counts replicated gradients
  int global_rank = 0;     ///< the job-wide rank (names the gradient dump); `rank` is the pipeline rank
  comm::Communicator* embedding = nullptr;  ///< tied embeddings: first + last stage ranks of every replica; else null
  comm::ProgressCursor* progress = nullptr;  ///< told the step and phase (cheap atomics); may be null
  /// The stop signal this process got (launch::WorkerSignalScope::caught; 0 = none), read once per step;
  /// null = never stop early.
  int (*stop_signal)() = nullptr;
};

/// How run_training ended.
struct TrainingEnd {
  int64_t steps_done = 0;  ///< optimizer steps completed (the run's, counting those before a resume)
  int stop_signal = 0;     ///< the signal the job stopped early on (train.on_signal); 0 = it ran every step
  bool checkpointed = false;  ///< a checkpoint of step steps_done was written at the stop
};

/// Runs optimizer steps until `ctx.steps` are done: from step 1, or after the step of the checkpoint
/// `ctx.resume_from` (its parameters and AdamW state loaded first; checkpoint/checkpoint.hpp). The gradients live in
/// contiguous buffers (grad_buffers.hpp, buckets of runtime.grad_bucket_size). Each step: run the schedule on this
/// replica's share of the global batch (gradients accumulate over the m microbatches); each stage's gradients are
/// averaged over the replicas and the tied embedding copies' gradients summed, started at the stage's REDUCE_GRAD
/// (runtime.overlap_grad_reduce) or after the schedule, and waited for when the schedule ends; then on every rank the
/// global gradient norm over every stage (grad_norm.hpp, one all-reduce), then
/// - a non-finite loss or gradient anywhere: with train.on_nonfinite `stop` every rank throws
///   ppctl::Error naming the step and the stage(s); with `skip` every rank logs a warning, discards
///   the gradients and takes no optimizer step;
/// - otherwise gradients are scaled to optimizer.clip_grad_norm when that is on, the learning rate
///   of the step (lr_schedule.hpp) is set on every parameter group, and AdamW steps.
/// The rank holding the last stage logs, every train.log_interval steps and at the first and last,
/// `step S/N | loss L | lr R | grad norm G | T tok/s | step X s` where L is the mean over the
/// step's microbatches (nats per byte), R the optimizer's learning rate for that step and G the
/// global gradient norm before clipping; with an observer, ` | A TFLOP/s` (achieved, per worker) and
/// ` | MFU M%` (when a peak is known) follow; ` | skipped` ends the line of a skipped step.
/// After a step, when due: the held-out eval loss (eval.hpp; logged by the last stage's rank as
/// `eval after step S: loss L`), then a checkpoint (checkpoint.dir, every checkpoint.interval
/// steps and after the last).
/// A stop signal (ctx.stop_signal) on any rank is carried in the step's gradient statistics, so every rank
/// learns of it after the same step's all-reduce; all finish that step (optimizer step, eval and checkpoint
/// when due), write a checkpoint of it when train.on_signal is `checkpoint` and checkpoint.dir is set (unless
/// one was just written), and return with stop_signal set. A signal during the last step changes nothing.
TrainingEnd run_training(LoopContext& ctx);

}  // namespace ppctl::train
