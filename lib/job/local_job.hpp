// Running a job's workers on this machine: host the rendezvous store, spawn, supervise, restart.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "launch/launcher.hpp"

namespace ppctl::job {

/// Hosts the job's TCPStore on runtime.master_addr (runtime.master_port; 0 = any free port), then
/// starts `world_size` workers `EXECUTABLE worker SPEC_PATH EXTRA_ARGS...` with launch::run_workers
/// and waits for them. `extra_env` is added to the workers' environment. `spec_path` is made absolute.
/// A failure is blamed on a running rank whose progress records (comm/progress_board.hpp) went
/// stale, when there is one, else on the rank whose own failure report (comm::FailureReport, which
/// each failing worker publishes) is not a peer's failure; the message carries that report's cause. After a failure, up to train.max_restarts times: logs the cause and the
/// restart count, keeps the attempt's metrics.jsonl as metrics.attempt<N>.jsonl, waits
/// train.restart_backoff_s and starts again with a fresh store, from the latest complete checkpoint
/// in checkpoint.dir (`--resume` replaced) or as before when none exists. Not restarted: a worker
/// exit code 2 (bad input) and SIGINT/SIGTERM (caught for the whole call). Giving up, the message is
/// "gave up after N restarts (train.max_restarts); last cause: ...". Returns how the last attempt
/// ended (see run_workers). Throws ppctl::CommError if the store cannot be hosted,
/// ppctl::LaunchError if a worker cannot start.
launch::LaunchResult run_local_job(const config::JobSpec& spec, int world_size,
                                   const std::string& executable, const std::string& spec_path,
                                   const std::vector<std::string>& extra_args,
                                   const std::vector<std::pair<std::string, std::string>>& extra_env = {});

/// The warning for a job started by torchrun or srun (`launcher`: "torchrun" or "slurm") whose spec sets
/// train.max_restarts > 0: only this local launcher restarts, so the field has no effect there; the text
/// names the launcher's own way to restart. None when train.max_restarts is 0.
std::optional<std::string> external_restart_warning(const config::JobSpec& spec, const std::string& launcher);

}  // namespace ppctl::job
