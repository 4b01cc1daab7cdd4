// The step loop: zero gradients, run the schedule, AdamW step, log loss / lr / tokens/s / step time.
#pragma once

#include <torch/torch.h>

#include <string>

#include "config/job_spec.hpp"
#include "data/text_dataset.hpp"
#include "model/gpt.hpp"
#include "runtime/executor.hpp"

namespace ppctl::train {

/// Everything the loop needs on one rank.
struct LoopContext {
  const config::JobSpec& spec;
  const schedule::Program& program;
  int rank = 0;
  runtime::Executor& executor;
  std::vector<model::StageModule> stages;  ///< this rank's stages (their parameters are optimised)
  const data::TextDataset* dataset;    ///< null unless this rank holds the first or last stage
  int64_t steps = 0;                   ///< optimizer steps to run
  std::string dump_gradients_dir;      ///< see WorkerOptions
};

/// AdamW as torch::optim::AdamW over the stages' parameters; weight decay on matrices (dim >= 2)
/// only, not on biases and LayerNorm gains (as GPT-2/Megatron do).
std::unique_ptr<torch::optim::AdamW> make_optimizer(const std::vector<model::StageModule>& stages,
                                                    const config::OptimizerSpec& spec);

/// Runs `ctx.steps` optimizer steps. The rank holding the last stage logs, every
/// train.log_interval steps and at the first and last, `step S/N | loss L | lr R | T tok/s | step X s`
/// where L is the mean over the step's microbatches (nats per byte).
void run_training(LoopContext& ctx);

}  // namespace ppctl::train
