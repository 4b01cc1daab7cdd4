// `ppctl verify`: the user-facing form of the correctness oracle.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.hpp"

namespace ppctl::job {

/// Exit code of `ppctl verify` when a difference exceeds the tolerance.
constexpr int kExitVerifyMismatch = 3;

struct VerifyReport {
  std::string text;   ///< table: max relative difference per parameter tensor and of the loss, verdict
  int exit_code = 0;  ///< 0 when every difference <= tolerance, kExitVerifyMismatch otherwise,
                      ///< or the failed worker's code
};

/// Runs one step of the job pipelined (its schedule and layout, `world_size` real worker processes
/// started from `executable`) and one unpipelined in this process over the same global batch, and
/// compares every parameter's gradient and the loss (relative to the reference's largest magnitude).
/// Gradient dumps go to a temporary folder, removed afterwards.
/// `worker_env` is passed to the workers (see run_local_job).
VerifyReport verify_job(const config::JobSpec& spec, int world_size, const std::string& executable,
                        const std::string& spec_path, double tolerance,
                        const std::vector<std::pair<std::string, std::string>>& worker_env = {});

}  // namespace ppctl::job
