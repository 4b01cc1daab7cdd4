// What a worker does when it fails: one log line, the exit code (2 for bad input, which a restart
// cannot fix), and its cause published to the launcher through the rendezvous store.
#pragma once

#include <exception>
#include <string>

namespace ppctl::job {

/// Exit code of a worker whose failure is bad input (core/error.hpp is_bad_input): the launcher
/// does not restart it (train.max_restarts).
inline constexpr int kWorkerExitBadInput = 2;
/// Exit code of a worker that failed otherwise.
inline constexpr int kWorkerExitFailure = 1;

/// `e`'s message as one line (LibTorch backtraces dropped, newlines joined with "; ", a leading
/// "rank R: " dropped: the launcher names the rank itself).
std::string one_line_cause(const std::exception& e);

/// Logs `e` (rank-prefixed) and returns the exit code: kWorkerExitBadInput when is_bad_input(e),
/// else kWorkerExitFailure. With `publish` (a worker of the local launcher: RANK, MASTER_ADDR, ...
/// set by it) also publishes a comm::FailureReport under comm::failure_key(RANK) in the launcher's
/// store (bounded by a few seconds; nothing happens when the store is gone). Never throws.
int report_worker_failure(const std::exception& e, bool publish);

}  // namespace ppctl::job
