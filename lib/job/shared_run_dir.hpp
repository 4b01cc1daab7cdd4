// The run directory of a job started by torchrun or Slurm, where every process is one worker: rank 0
// makes it as the local launcher does and publishes its path through the rendezvous store; the other
// ranks write into that one folder (shared file system); rank 0 merges the trace at the end.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "comm/job_store.hpp"
#include "config/job_spec.hpp"
#include "core/error.hpp"
#include "job/prepared_job.hpp"
#include "observe/run_dir.hpp"

namespace ppctl::job {

/// The store key under which rank 0 publishes the run directory: JSON {"path": ABSOLUTE_PATH}, or
/// {"error": MESSAGE} when it could not make it.
inline constexpr const char* kRunDirKey = "ppctl/run_dir";

/// The run directory cannot be made (bad input: --run-dir or observe.runs_dir; exit code 2).
class RunDirectoryError : public Error {
 public:
  using Error::Error;
};

/// plan.txt of a run: the plan `ppctl plan` prints (layout, simulated step with the default costs,
/// actions per rank).
std::string run_plan_text(const PreparedJob& job);

/// The most of the spec's text run_start_text prints (32 KiB); a longer spec is cut at a line end there.
inline constexpr std::size_t kEchoedSpecBytes = 32 * 1024;

/// What `ppctl train` prints before its run directory's path: the spec text as validated (up to
/// kEchoedSpecBytes, then a line saying how much more there is and that config.yaml in the run directory
/// holds it all), then the plan.
std::string run_start_text(const std::string& spec_path, const std::string& spec_text,
                           const std::string& plan_text);

/// One rank's part of the shared run directory.
struct SharedRunDirectory {
  std::optional<observe::RunDirectory> made;  ///< rank 0: the folder it made (to finish_shared_run_directory)
  std::optional<std::string> path;   ///< the folder this rank writes into; none when it cannot see it
};

/// Under torchrun or Slurm, before the process groups are built. Rank 0 makes the run directory as
/// the local launcher does (create_run_directory: `explicit_dir` when not empty, else a new
/// observe.runs_dir/<spec>-<time>Z relative to its working directory; config.yaml, plan.txt) with
/// `rank0.log` as its log file, prints run_start_text and the path, and publishes the absolute path
/// under kRunDirKey in `store` (null: a job of one rank, nobody to tell). Every other rank waits for
/// that key within `timeout` (runtime.comm_timeout_s), so all ranks use the one folder whenever each
/// started, then looks for the folder's config.yaml (polling up to min(timeout, 10 s), for network
/// file systems that show new entries late) and adds `rank<R>.log` of it as a log file.
/// A rank that cannot see the folder (a working directory that is not on a shared file system) logs
/// one warning naming the folder, its host and the fix, and goes on without writing files (`path`
/// none). Throws RunDirectoryError when rank 0 cannot make the folder (rank 0 publishes the message
/// first and waits, within `timeout`, until every rank has read it, so every rank exits with it); ppctl::CommTimeout when rank 0 published nothing within
/// `timeout`; ppctl::CommError when the store fails meanwhile.
SharedRunDirectory share_run_directory(comm::JobStore* store, int rank, const PreparedJob& job,
                                       const std::string& spec_path, const std::string& explicit_dir,
                                       std::chrono::milliseconds timeout);

/// Rank 0, after its worker ended (however it ended): waits until every pipeline rank's trace part
/// (`trace.rank<R>.json`, R < `pipeline_ranks`) exists or `grace` passes (after a successful run the
/// final barrier has passed, so they exist: the wait only covers file systems that show them late;
/// after a failure, ranks still failing get that long to write theirs), then finish_run_directory:
/// merges what exists into trace.json and names the ranks that left no part.
void finish_shared_run_directory(const observe::RunDirectory& run, int pipeline_ranks, bool traced,
                                 std::chrono::milliseconds grace, int64_t data_parallel = 1,
                                 int64_t tensor_parallel = 1);

}  // namespace ppctl::job
