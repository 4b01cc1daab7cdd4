// A worker process: identity from the environment, its own pipeline stage, the training loop.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "comm/job_store.hpp"
#include "comm/launch_env.hpp"
#include "config/job_spec.hpp"
#include "job/worker_handover.hpp"
#include "train/fault_injection.hpp"

namespace ppctl::job {

/// What `ppctl worker` (started by the launcher) is asked to do.
struct WorkerOptions {
  std::string spec_path;               ///< the job spec (validated again here)
  std::optional<int64_t> steps;        ///< overrides train.steps when set (validated with the spec)
  std::string dump_gradients_dir;      ///< testing: after step 1's backward, write this rank's
                                       ///< gradients (after clipping), the loss and the global
                                       ///< gradient norm to DIR/rank<R>.pt and stop
  std::optional<train::NanInjection> inject_nan;  ///< testing: poison one stage's gradients at one step
  std::string resume_from;  ///< a checkpoint folder to continue from (resolved by `ppctl train --resume`)
  /// testing: (step, files): SIGKILL this worker after it wrote `files` unit files of the
  /// checkpoint of `step` (--inject-crash-in-checkpoint STEP:FILES)
  std::optional<std::pair<int64_t, int64_t>> crash_in_checkpoint;
  /// Set by `ppctl train` under torchrun or Slurm (comm::external_identity; rank 0 hosts the
  /// store); unset for workers of the local launcher, which read RANK etc. it set.
  std::optional<comm::RendezvousInfo> identity;
  /// With `identity`: this rank's connection to the job's store, made for the run directory
  /// (job/shared_run_dir.hpp); the process groups are built on it. Null for a one-rank job.
  std::shared_ptr<comm::JobStore> store;
  /// With `identity`: the run directory this rank writes into (none when it cannot see it); its
  /// rank log is added already. Local workers read kRunDirVariable instead.
  std::optional<std::string> run_dir;
  /// The spec and custom schedule texts to run, as validated: set by `ppctl train` under torchrun or Slurm
  /// (what this rank read and checked itself, not read again). Unset: the texts the local launcher handed
  /// over (handed_over_texts), else the spec file itself (a worker started by hand).
  std::optional<JobTexts> texts;
};

/// Throws ppctl::PlanError when runtime.device is cuda and this machine shows no CUDA device (the
/// launcher calls it before spawning local workers).
void check_device_available(const config::JobSpec& spec);

/// Runs one worker: sets the thread counts first, takes options.identity or reads RANK/WORLD_SIZE/...
/// (comm::rendezvous_from_env), resolves the data-parallel size from the world size
/// (plan::resolve_data_parallel),
/// loads the spec (options.texts, else the texts handed over, else the file: see WorkerOptions::texts), builds
/// and validates the schedule (and checks it against kProgramHashVariable when set), connects the process group, builds only this
/// rank's stage and trains. Returns 0 on success; after a stop signal (launch::WorkerSignalScope, which the
/// caller creates; train.on_signal) launch::kExitStoppedResumable when a checkpoint was written at the stop,
/// else 128 + the signal. Throws ppctl errors (the caller logs them and exits non-zero, which makes the
/// launcher stop the job).
int run_worker(const WorkerOptions& options);

}  // namespace ppctl::job
