// Whether a job can resume from a checkpoint: the checkpoint's own continuity check, then the
// learning-rate schedule's horizon and the steps left. Torch-free (the launcher checks before any worker starts).
#pragma once

#include <cstdint>
#include <filesystem>

#include "checkpoint/checkpoint_meta.hpp"
#include "config/job_spec.hpp"

namespace ppctl::train {

/// Throws ppctl::CheckpointError when the job `spec` cannot continue from `meta`: first everything
/// checkpoint::check_continues checks (model shape, seed, data, global batch `sequences_per_step`), then
/// another learning-rate schedule (optimizer.lr_schedule, lr or warmup_steps, and for cosine / linear decay
/// also optimizer.min_lr or the total step count `total_steps`, train.steps or --steps, since the decay
/// would restart from another horizon) unless every step still to train keeps its rate, then no step left
/// (meta.step >= `total_steps`). A checkpoint without a recorded schedule (older ppctl) is not checked for
/// it: a warning says so and the spec's schedule applies. Each message names the field, both values and
/// the fix.
void check_resumable(const checkpoint::CheckpointMeta& meta, const config::JobSpec& spec,
                     int64_t sequences_per_step, int64_t total_steps, const std::filesystem::path& checkpoint);

}  // namespace ppctl::train
