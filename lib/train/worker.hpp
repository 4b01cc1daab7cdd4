// A worker process: identity from the environment, its own pipeline stage, the training loop.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ppctl::train {

/// What `ppctl worker` (started by the launcher) is asked to do.
struct WorkerOptions {
  std::string spec_path;               ///< the job spec (validated again here)
  std::optional<int64_t> steps;        ///< overrides train.steps when set
  std::string dump_gradients_dir;      ///< testing: after step 1's backward, write this rank's
                                       ///< gradients (and loss) to DIR/rank<R>.pt and stop
};

/// Runs one worker: sets the thread counts first, reads RANK/WORLD_SIZE/... (comm::rendezvous_from_env),
/// loads the spec, builds and validates the schedule, connects the process group, builds only this
/// rank's stage and trains. Returns 0 on success; throws ppctl errors (the caller logs them and
/// exits non-zero, which makes the launcher stop the job).
int run_worker(const WorkerOptions& options);

}  // namespace ppctl::train
