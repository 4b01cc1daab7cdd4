// Checkpoints: per-layer model and optimizer state, written atomically, resumable at another stage count (the layers
// regroup) and tensor-parallel size (the shards recut) — saving, finding and loading them.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"
#include "checkpoint/unit_files.hpp"
#include "comm/communicator.hpp"
#include "config/job_spec.hpp"
#include "model/stage.hpp"

namespace ppctl::checkpoint {

/// What save_checkpoint needs on one rank.
struct CheckpointWriter {
  const config::JobSpec& spec;
  const std::vector<model::StageModule>& stages;  ///< this rank's stages
  const torch::optim::Optimizer& optimizer;       ///< over exactly these stages' parameters
  int rank = 0;                                   ///< rank in `comm` (0 of tp rank 0 finalises)
  comm::Communicator* comm = nullptr;             ///< the pipeline's ranks (of this tp rank); null for one
                                                  ///< stage (the tp group comes from the stages)
  int64_t sequences_per_step = 0;
  /// Testing: SIGKILL this process after it has written this many unit files of the checkpoint of
  /// step `crash_step` (the --inject-crash-in-checkpoint option).
  std::optional<std::pair<int64_t, int64_t>> crash_after_files;
  int64_t total_steps = 0;  ///< the run's total steps (the schedule's horizon); 0 = spec.train.steps
};

/// Collective: every writing rank calls it after optimizer step `step` (counted from 1): the ranks of one
/// data-parallel replica, every tensor-parallel rank of every stage. Each writes, into DIR/step-<step>.partial, the
/// unit files of its own stages and nothing of another rank's: at t = 1 `<unit>.pt`; at t > 1 its shards of the
/// unit's split parameters (and their AdamW state) as `<unit>.tp<r>-of-<t>.pt`, and on tp rank 0 the replicated
/// parameters as `<unit>.replicated.pt` (checkpoint_files). No tensor is gathered: every rank writes only its own
/// shards' bytes. Each file is written atomically with its size and FNV-1a checksum beside it (`<file>.sum`), so that
/// finalising reads no tensor file. After barriers over the tensor-parallel group, then the pipeline of tp rank 0,
/// pipeline rank 0 of tp rank 0 writes meta.json from the sums (tensor_parallel recorded), renames the folder to
/// DIR/step-<step> (an existing one of that name is replaced only once the new one is complete), updates DIR/latest
/// atomically, then deletes all but the newest checkpoint.keep checkpoints and any leftover .partial folder.
/// A crash at any point leaves the previous checkpoint and `latest` intact.
/// Throws ppctl::Error naming the file on an I/O failure (a sum missing: a rank did not write its file),
/// ppctl::CommError on a barrier timeout.
void save_checkpoint(const CheckpointWriter& writer, int64_t step, double lr);

/// The checkpoint folder `path` means: a folder with meta.json is itself a checkpoint; a folder
/// with `latest` (a checkpoint.dir) means the checkpoint `latest` names. Throws
/// ppctl::CheckpointError naming the file and what to pass instead when neither holds, `latest`
/// names a missing folder, or the folder is an incomplete (.partial) one.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& path);

/// Reads and checks DIR/meta.json and that every unit file of its tensor_parallel (checkpoint_files) is listed and
/// exists with the recorded size.
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

/// Loads every parameter of `stages` and its AdamW state from the unit files of `checkpoint` (checksums verified
/// against `meta`), whatever tensor-parallel size t wrote them: each rank at t' reads, unit by unit, only the files
/// that hold part of its shards (UnitReader): at t' == t its own shard files and the replicated file; at another t'
/// the saved shards overlapping its own (plan::shard_pieces), cut and joined; from whole files (t = 1, and every
/// checkpoint written before tensor parallelism) the whole unit file, of which it keeps its shard. Throws
/// ppctl::CheckpointError naming the file when one is corrupt or lacks a parameter, or a shape differs.
void load_checkpoint(const std::filesystem::path& checkpoint, const CheckpointMeta& meta,
                     const std::vector<model::StageModule>& stages,
                     torch::optim::Optimizer& optimizer);

}  // namespace ppctl::checkpoint
