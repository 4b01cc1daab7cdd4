// Checkpoint metadata (meta.json): what a checkpoint records besides its tensors, its JSON form, and
// whether a job spec continues its model, data and batch (the learning-rate schedule's horizon is
// checked above, in train/resume.hpp, which knows the schedule's math). Torch-free, so the launcher side
// and the fuzz targets use it without LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/job_spec.hpp"

namespace ppctl::checkpoint {

/// The fields that decide the learning rate of every step (optim/lr_schedule.hpp): the schedule's
/// horizon. Recorded so that a resume that would change the rate of the remaining steps is refused.
struct CheckpointSchedule {
  config::LrSchedule lr_schedule = config::LrSchedule::Constant;  ///< optimizer.lr_schedule
  double lr = 0.0;           ///< optimizer.lr (the peak rate)
  double min_lr = 0.0;       ///< optimizer.min_lr (the floor of cosine / linear decay)
  int64_t warmup_steps = 0;  ///< optimizer.warmup_steps
  int64_t steps = 0;         ///< the run's total optimizer steps (train.steps, or --steps when given)
};

/// A checkpoint folder DIR/step-00000100 holds one file per unit of the model — `embedding.pt`,
/// `block<i>.pt` for global block i, `head.pt` — whoever held them, so any stage count can load
/// them; and `meta.json`, written last. DIR/latest names the newest complete checkpoint. Written at
/// tensor_parallel t > 1, a unit is t shard files `<unit>.tp<r>-of-<t>.pt` (rank r's shards of the split
/// parameters) and `<unit>.replicated.pt` (checkpoint/unit_files.hpp), the same dict format in each.
/// Each unit file is torch::pickle_save of a dict (loadable with Python's torch.load) with, for
/// every parameter NAME of the unit (names as StageModule::named_parameters, e.g.
/// `block3.fc1.weight`): `param/NAME`, and once AdamW has stepped `exp_avg/NAME`,
/// `exp_avg_sq/NAME`, `step/NAME` (int64 scalar). With tied embeddings over several stages the
/// last stage's copy `lm_head.weight` is saved in head.pt; saved by one stage (no copy) it is
/// loaded from embedding.pt's `tok_embed.weight`, the two being identical by construction.
/// No global random state exists to save: weights come from (seed, layer) and dropout masks from
/// (seed, step, microbatch, layer); the data position is step x sequences_per_step.
struct CheckpointMeta {
  int64_t step = 0;                ///< optimizer steps completed; training resumes at step + 1
  config::ModelSpec model;         ///< the model's shape (must match the resuming spec), and model.init_from
                                   ///< (meta.json's model.init_from; absent when empty and in checkpoints
                                   ///< saved before it was recorded): the folder `ppctl export` takes the
                                   ///< tokenizer files from
  bool tie_embeddings = true;      ///< model.tie_embeddings when saved (must match)
  int64_t sequences_per_step = 0;  ///< global batch in sequences (microbatches x micro_batch_size x dp)
  int64_t next_sample = 0;         ///< data position: the stream index of the next training sequence
  /// data position per source (data::training_position): samples each data.path / data.blend source
  /// supplied before next_sample; empty in checkpoints written before blends (one text source).
  std::vector<int64_t> data_counts;
  std::vector<std::string> data_sources;  ///< data::describe_sources of the saving spec (must match)
  uint64_t seed = 0;               ///< train.seed when saved (must match: it orders the data)
  double eval_fraction = 0.0;      ///< data.eval_fraction when saved (must match: it decides which
                                   ///< sequences train)
  int64_t stages = 0;              ///< pipeline.stages when saved (informational)
  /// pipeline.tensor_parallel when saved: 1 for whole unit files (and in every checkpoint written before tensor
  /// parallelism), t > 1 for per-rank shard files (checkpoint.hpp, checkpoint_files; meta.json version 2).
  int64_t tensor_parallel = 1;
  double lr = 0.0;                 ///< learning rate of the last step taken
  /// The learning-rate schedule the run was trained with (its horizon); nullopt in checkpoints
  /// written before it was recorded (meta.json without `schedule`).
  std::optional<CheckpointSchedule> schedule;
  /// The run the checkpoint belongs to (`--resume auto` accepts only this run's; run_mismatch): the spec's
  /// run hash (run_spec_hash) and the Slurm job id (SLURM_JOB_ID when saved; empty outside Slurm). Both empty
  /// in checkpoints written before they were recorded.
  std::string run_hash;
  std::string slurm_job_id;
  /// unit file name -> (size in bytes, FNV-1a 64 checksum)
  std::map<std::string, std::pair<uint64_t, uint64_t>> files;
};

/// 16 hex digits identifying a run by what decides its training: the model (every model.* field but init_from,
/// dropout included), the data sources (data::describe_sources), data.eval_fraction, train.seed, the global
/// batch `sequences_per_step`, optimizer.* but `distributed` (bitwise the same updates), and
/// runtime.precision. Not in it, so that they may change between a run's attempts: the stage count,
/// schedule, data parallelism split, train.steps, checkpoint.*, eval.*, observe.*, runtime.* but precision.
/// FNV-1a 64 of a canonical JSON text of those fields.
std::string run_spec_hash(const config::JobSpec& spec, int64_t sequences_per_step);

/// Whether `meta` was written by the run `spec_hash` (run_spec_hash) in Slurm job `slurm_job_id` (empty
/// outside Slurm): nullopt when it was (the same Slurm job, requeued or not, or the same run hash: a re-run
/// of the same spec); else why not, e.g. "it was written by a run with spec hash 0123... (this spec:
/// 4567...), in Slurm job 42 (this job: 43)", or that it records no run (written before ppctl recorded it).
std::optional<std::string> run_mismatch(const CheckpointMeta& meta, const std::string& spec_hash,
                                        const std::string& slurm_job_id);

/// meta.json's text for `meta` (JSON, 2-space indented, ending in a newline).
std::string checkpoint_meta_text(const CheckpointMeta& meta);

/// Parses meta.json's `text` (read from `file`, which messages name) and checks its values: step,
/// sequences_per_step, model sizes >= 1, next_sample = step x sequences_per_step, eval_fraction in
/// [0, 0.5], per-source counts summing to next_sample, a unit file listed for every layer, version 1 (whole files,
/// tensor_parallel 1) or 2 (tensor_parallel from 2 to the number of files listed), a schedule
/// (when present) with lr > 0, min_lr in [0, lr], warmup_steps >= 0, steps >= 1.
/// Throws ppctl::CheckpointError naming `file` and the fix on anything else (never another exception).
CheckpointMeta parse_checkpoint_meta(std::string_view text, const std::filesystem::path& file);

/// Throws ppctl::CheckpointError naming `file`, `why` and the fix (resume from another checkpoint).
[[noreturn]] void throw_corrupt_checkpoint(const std::filesystem::path& file, const std::string& why);

/// Throws ppctl::CheckpointError when the job `spec` does not continue the run `meta` was saved from:
/// another model shape or model.tie_embeddings, another train.seed, data.eval_fraction or data sources
/// (format, dtype, weight, files: the data would not continue), or another global batch
/// (`sequences_per_step`; the data position and LR schedule would not continue). Each message names the
/// field, both values and the fix. The learning-rate schedule and the steps left are checked by
/// train::check_resumable, which calls this first.
void check_continues(const CheckpointMeta& meta, const config::JobSpec& spec, int64_t sequences_per_step,
                     const std::filesystem::path& checkpoint);

}  // namespace ppctl::checkpoint
