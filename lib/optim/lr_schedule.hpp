// The learning-rate schedule: linear warmup, then constant, cosine or linear decay to a floor.
// A pure function of the optimizer step, applied once per optimizer step (never per microbatch).
#pragma once

#include <cstdint>

#include "config/job_spec.hpp"

namespace ppctl::optim {

/// The learning rate of optimizer step `step` (counted from 0) in a run of `total_steps` steps,
/// following Megatron-LM's OptimizerParamScheduler.get_lr
/// (megatron/core/optimizer_param_scheduler.py), which counts the step being taken from 1, and
/// nanoGPT's get_lr (train.py) for the cosine shape. With lr = spec.lr, W = spec.warmup_steps, N =
/// total_steps, k = step:
/// - warmup, k < W: lr * (k + 1) / W (the first step uses lr / W, step W - 1 uses lr);
/// - then, with progress r = (k + 1 - W) / (N - W) clamped to [0, 1] (r = 1 at the last step):
///   `constant`: lr; `cosine`: min_lr + (lr - min_lr) * (1 + cos(pi r)) / 2;
///   `linear`: min_lr + (lr - min_lr) * (1 - r).
/// So cosine and linear decay from lr (at the end of warmup) to spec.min_lr, reached at the last
/// step and kept after it; the rate never falls below min_lr after warmup. Steps skipped for
/// non-finite values still count (the schedule follows the step number).
double learning_rate(const config::OptimizerSpec& spec, int64_t step, int64_t total_steps);

}  // namespace ppctl::optim
