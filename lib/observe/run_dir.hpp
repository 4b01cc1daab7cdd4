// The run directory of one `ppctl train`: the exact spec text, the plan, per-rank logs, metrics.jsonl
// and the merged trace, in one folder printed at start. No torch.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.hpp"

namespace ppctl::observe {

/// Environment variable through which the launcher hands workers the run directory (absolute).
inline constexpr const char* kRunDirVariable = "PPCTL_RUN_DIR";

/// A run directory made by create_run_directory.
struct RunDirectory {
  std::string path;       ///< absolute
  int64_t origin_us = 0;  ///< wall-clock microseconds since the Unix epoch when it was made: time 0
                          ///< of the merged trace
};

/// `<spec file name without extension>-<YYYYmmdd-HHMMSS>Z` for `when` in UTC, e.g.
/// "example-20261130-045512Z".
std::string run_directory_name(const std::string& spec_path, std::time_t when);

/// Makes the run directory and writes into it `config.yaml` (`spec_text`: the exact text the
/// launcher validated and hands the workers) and `plan.txt` (`plan_text`), then adds `log_name`
/// (`launcher.log`; rank 0 under torchrun or Slurm: `rank0.log`) as a log file of this process. The directory is `explicit_dir` when not empty (created with its
/// parents; if it exists it must be empty), else a new `spec.observe.runs_dir/run_directory_name(...)`
/// (a `-2`, `-3`, ... suffix when two runs start in the same second).
/// Throws ppctl::Error naming the folder, the reason and the fix when it cannot be made or written.
RunDirectory create_run_directory(const config::JobSpec& spec, const std::string& spec_text,
                                  const std::string& plan_text, const std::string& explicit_dir,
                                  const std::string& log_name = "launcher.log");

/// The variables workers need to write into `run` (kRunDirVariable).
std::vector<std::pair<std::string, std::string>> run_directory_env(const RunDirectory& run);

/// The run directory handed to this worker (kRunDirVariable), if any.
std::optional<std::string> run_directory_from_env();

/// After the workers ended (however they ended): merges the ranks' trace parts into
/// `run.path/trace.json` (observe::merge_trace_parts) and logs what was merged and which ranks had no
/// part (`traced` false: tracing was off, observe.trace_steps 0). `world_size` is the pipeline ranks of
/// replica 0 (tp rank 0), the only ones that trace when `data_parallel` or `tensor_parallel` > 1 (the log line and
/// track names say so).
/// Logs instead of throwing: a failed merge must not hide how the job ended.
void finish_run_directory(const RunDirectory& run, int world_size, bool traced, int64_t data_parallel = 1,
                          int64_t tensor_parallel = 1);

}  // namespace ppctl::observe
