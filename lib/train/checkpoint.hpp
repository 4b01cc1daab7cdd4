// Checkpoints: per-layer model and optimizer state, written atomically, resumable at another stage
// count (the layers regroup) — saving, finding and loading them.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "config/job_spec.hpp"
#include "model/stage.hpp"

namespace ppctl::train {

/// A checkpoint folder DIR/step-00000100 holds one file per unit of the model — `embedding.pt`,
/// `block<i>.pt` for global block i, `head.pt` — whoever held them, so any stage count can load
/// them; and `meta.json`, written last. DIR/latest names the newest complete checkpoint.
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
  config::ModelSpec model;         ///< the model's shape (must match the resuming spec)
  bool tie_embeddings = true;      ///< model.tie_embeddings when saved (must match)
  int64_t sequences_per_step = 0;  ///< global batch in sequences (microbatches x micro_batch_size x dp)
  int64_t next_sample = 0;         ///< data position: the stream index of the next training sequence
  uint64_t seed = 0;               ///< train.seed when saved (must match: it orders the data)
  double eval_fraction = 0.0;      ///< data.eval_fraction when saved (must match: it decides which
                                   ///< sequences train)
  int64_t stages = 0;              ///< pipeline.stages when saved (informational)
  double lr = 0.0;                 ///< learning rate of the last step taken
  /// unit file name -> (size in bytes, FNV-1a 64 checksum)
  std::map<std::string, std::pair<uint64_t, uint64_t>> files;
};

/// The unit a parameter belongs to: `embedding` (tok_embed, pos_embed), `block<i>` or `head`
/// (ln_f, lm_head). Throws ppctl::InternalError for any other name.
std::string checkpoint_unit(const std::string& parameter_name);

/// The unit files a model with `layers` blocks has: embedding.pt, block0.pt ... head.pt.
std::vector<std::string> checkpoint_files(int64_t layers);

/// What save_checkpoint needs on one rank.
struct CheckpointWriter {
  const config::JobSpec& spec;
  const std::vector<model::StageModule>& stages;  ///< this rank's stages
  const torch::optim::Optimizer& optimizer;       ///< over exactly these stages' parameters
  int rank = 0;                                   ///< rank in `comm` (0 finalises)
  comm::Communicator* comm = nullptr;             ///< every rank of the job; null for one rank
  int64_t sequences_per_step = 0;
  /// Testing: SIGKILL this process after it has written this many unit files of the checkpoint of
  /// step `crash_step` (the --inject-crash-in-checkpoint option).
  std::optional<std::pair<int64_t, int64_t>> crash_after_files;
};

/// Collective: every rank calls it after optimizer step `step` (counted from 1). Writes
/// DIR/step-<step>.partial/<unit>.pt for this rank's units (each atomically); after a barrier rank 0
/// checks every unit file, writes meta.json, renames the folder to DIR/step-<step> (an existing
/// one of that name is replaced only once the new one is complete), updates DIR/latest atomically,
/// then deletes all but the newest checkpoint.keep checkpoints and any leftover .partial folder.
/// A crash at any point leaves the previous checkpoint and `latest` intact.
/// Throws ppctl::Error naming the file on an I/O failure, ppctl::CommError on a barrier timeout.
void save_checkpoint(const CheckpointWriter& writer, int64_t step, double lr);

/// The checkpoint folder `path` means: a folder with meta.json is itself a checkpoint; a folder
/// with `latest` (a checkpoint.dir) means the checkpoint `latest` names. Throws
/// ppctl::CheckpointError naming the file and what to pass instead when neither holds, `latest`
/// names a missing folder, or the folder is an incomplete (.partial) one.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

/// Reads and checks DIR/meta.json and that every unit file exists with the recorded size.
/// Throws ppctl::CheckpointError naming the file when one is missing, truncated or unreadable.
CheckpointMeta read_checkpoint_meta(const std::filesystem::path& checkpoint);

/// Reads every unit file of `checkpoint` and compares its size and FNV-1a checksum with `meta`
/// (the launcher does this before starting workers). Throws ppctl::CheckpointError naming the first
/// file that differs.
void verify_checkpoint_files(const std::filesystem::path& checkpoint, const CheckpointMeta& meta);

/// Creates checkpoint.dir when missing and writes and removes a probe file in it, so that a folder
/// that cannot hold checkpoints fails before training starts rather than at the first save.
/// Throws ppctl::CheckpointError naming the folder and the system's reason.
void check_checkpoint_dir_writable(const std::filesystem::path& dir);

/// Throws ppctl::CheckpointError when the job `spec` cannot continue from `meta`: another model
/// shape or model.tie_embeddings, another train.seed or data.eval_fraction (the data would not
/// continue), another global batch (the data position and LR schedule would not continue), or no step
/// left (meta.step >= `total_steps`). Each message names the field, both values and the fix.
void check_resumable(const CheckpointMeta& meta, const config::JobSpec& spec,
                     int64_t sequences_per_step, int64_t total_steps,
                     const std::filesystem::path& checkpoint);

/// Loads every parameter of `stages` and its AdamW state from the unit files of `checkpoint`
/// (checksums verified against `meta`). Throws ppctl::CheckpointError naming the file when one is
/// corrupt or lacks a parameter, or a shape differs.
void load_checkpoint(const std::filesystem::path& checkpoint, const CheckpointMeta& meta,
                     const std::vector<model::StageModule>& stages,
                     torch::optim::Optimizer& optimizer);

}  // namespace ppctl::train
