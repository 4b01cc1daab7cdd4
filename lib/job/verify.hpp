// `ppctl verify`: the user-facing form of the correctness oracle.
#pragma once

#include <string>

#include "job/prepared_job.hpp"

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
/// The workers run the spec and schedule texts `job` validated (handed over through a temporary folder:
/// job/worker_handover.hpp); gradient dumps go to another. Both are removed afterwards.
VerifyReport verify_job(const PreparedJob& job, const std::string& executable, const std::string& spec_path,
                        double tolerance);

}  // namespace ppctl::job
