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

#include "checkpoint/checkpoint_meta.hpp"
#include "comm/communicator.hpp"
#include "config/job_spec.hpp"
#include "model/stage.hpp"

namespace ppctl::checkpoint {

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
  int64_t total_steps = 0;  ///< the run's total steps (the schedule's horizon); 0 = spec.train.steps
  /// False on tensor-parallel ranks above 0: they take part in gathering every tensor whole (collectives over
  /// their stages' tensor-parallel groups, unit by unit) and write nothing; tp rank 0 writes the whole tensors.
  bool writes = true;
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
/// Throws ppctl::CheckpointError naming the folder and the system's reason, after `location` (where the spec
/// writes checkpoint.dir, config::field_location) when given.
void check_checkpoint_dir_writable(const std::filesystem::path& dir, const std::string& location = {});

/// Loads every parameter of `stages` and its AdamW state from the unit files of `checkpoint`
/// (checksums verified against `meta`). The files hold whole tensors, whatever t wrote them: at t > 1 each
/// rank takes its shard (model::StageModuleImpl::shard_of) after reading the whole unit file (one layer at a
/// time; reading only a shard's bytes is not done yet). Throws ppctl::CheckpointError naming the file when one is
/// corrupt or lacks a parameter, or a shape differs.
void load_checkpoint(const std::filesystem::path& checkpoint, const CheckpointMeta& meta,
                     const std::vector<model::StageModule>& stages,
                     torch::optim::Optimizer& optimizer);

}  // namespace ppctl::checkpoint
