// The stop signals (SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2) reaching the launcher: caught into a flag
// while a StopSignalScope lives, so the launcher finishes what it is writing, asks its workers to stop
// (train.on_signal) and says what it got instead of dying half-way (issue 12, fault 8; issue 26). No torch.
#pragma once

#include <signal.h>

namespace ppctl::launch {

/// The signals a user or a cluster commonly sends to end a job: Ctrl-C, `kill`, a closed terminal, and the
/// two Slurm's `--signal` (and `scancel --signal`) are usually given. None of them ends ppctl silently.
inline constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};

/// ppctl's exit code when a job stopped on one of kStopSignals at a step boundary and wrote a checkpoint
/// there (train.on_signal: checkpoint): nothing failed and `--resume auto` continues it. 75 is
/// sysexits.h's EX_TEMPFAIL ("temporary failure; the user is invited to retry"), apart from 1 (failure),
/// 2 (bad input), 3 (verify mismatch) and 128 + N (ended by signal N without a checkpoint).
inline constexpr int kExitStoppedResumable = 75;

/// While at least one scope lives, the kStopSignals only set a process-wide flag (and count; the outermost
/// scope unblocks them in its thread, so that one held by hold_stop_signals is delivered now), and
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

  /// The first of kStopSignals caught since the outermost scope started; 0 when none.
  static int caught();
  /// How many of kStopSignals were caught since the outermost scope started.
  static int count();
};

/// kStopSignals as a sigset_t, for sigprocmask / pthread_sigmask.
sigset_t stop_signal_set();

/// Blocks kStopSignals in the calling thread (pthread_sigmask): one that arrives stays pending, also across
/// execve, until a StopSignalScope or WorkerSignalScope installs its handlers and unblocks them. The light
/// `ppctl` calls it before it execs ppctl-torch for `train`, so that a signal during the load of LibTorch is
/// reported and not the default action's silent death.
void hold_stop_signals();

/// "SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2" (or "a stop signal") for messages.
const char* stop_signal_name(int sig);

}  // namespace ppctl::launch
