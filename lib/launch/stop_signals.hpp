// SIGINT/SIGTERM reaching the launcher: caught into a flag while a StopSignalScope lives, so the
// launcher finishes what it is writing, stops its workers and says "interrupted" instead of dying
// half-way (issue 12, fault 8). No torch.
#pragma once

namespace ppctl::launch {

/// While at least one scope lives, SIGINT and SIGTERM only set a process-wide flag (and count), and
/// SIGCHLD keeps its default disposition (so worker exit statuses stay available). Scopes nest: the
/// outermost one clears the flag when it starts and restores the previous dispositions when it ends;
/// an inner scope (run_workers' own) sees a signal caught before it started. Create scopes on one
/// thread only (the dispositions are process-wide).
class StopSignalScope {
 public:
  StopSignalScope();
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;

  /// The first SIGINT/SIGTERM caught since the outermost scope started; 0 when none.
  static int caught();
  /// How many SIGINT/SIGTERM were caught since the outermost scope started.
  static int count();
};

/// "SIGINT" / "SIGTERM" (or "signal N") for messages.
const char* stop_signal_name(int sig);

}  // namespace ppctl::launch
