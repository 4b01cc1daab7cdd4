// A worker's stop signals: the first of kStopSignals asks the job to stop at the next step boundary
// (train.on_signal), a second one ends this process at once; forwarded requests from the local
// launcher carry the signal the launcher got. Async-signal-safe handler, no torch.
#pragma once

#include <optional>
#include <sys/types.h>

namespace ppctl::launch {

/// While the scope lives, in this (worker) process:
/// - before defer_to_step_boundary (set-up, the rendezvous: no step to wait for, nothing to save), the first
///   of kStopSignals writes one line and exits with 128 + the signal;
/// - after it, the first of kStopSignals sets caught() and writes one line to stderr at once ("got SIGUSR1:
///   ... stopping at the next step boundary"); the training loop reads caught() at each step;
/// - any later one (but a forwarded request after the first, or the first signal again after its forwarded
///   copy: one event that reached both the launcher and this worker) writes a line and ends the process by
///   that signal's default action, so a second
///   Ctrl-C or SIGTERM is not held up by a checkpoint being written (the previous complete checkpoint and
///   `latest` stay: checkpoint/checkpoint.hpp's writes are atomic);
/// - from `launcher` (the local launcher's pid; nullopt under torchrun or Slurm): SIGUSR1 sent with
///   sigqueue is a forwarded request and counts as the signal in its value (forward_stop_request);
///   SIGTERM is the launcher ending the job (a failed peer, a second signal) and takes the default
///   action at once, as it did before workers caught signals.
/// - from `agent` (torchrun's agent, torchrun_agent_pid; nullopt elsewhere): the agent's copy of the signal this
///   worker already got from elsewhere, or the other way round, is one event (a signal to every process of a
///   Slurm step reaches the agent, which sends it on to each worker's process group, and the workers too); a
///   third delivery, or the same signal twice from one side, ends the process as a second signal.
/// It unblocks kStopSignals on the calling thread (the local launcher starts workers with them blocked, so a
/// request sent while the worker loads stays pending instead of killing it).
/// Create one per process, on the main thread, before anything long starts (the spec, the rendezvous).
class WorkerSignalScope {
 public:
  /// `rank` prefixes the lines written ("[rank 3] "); nullopt writes none.
  WorkerSignalScope(std::optional<int> rank, std::optional<pid_t> launcher, std::optional<pid_t> agent = std::nullopt);
  ~WorkerSignalScope();  ///< restores the previous dispositions
  WorkerSignalScope(const WorkerSignalScope&) = delete;
  WorkerSignalScope& operator=(const WorkerSignalScope&) = delete;

  /// The first stop signal this process got (a forwarded one counts as the launcher's); 0 when none.
  static int caught();
  /// From now on the first stop signal waits for the training loop's next step boundary (call it just
  /// before the loop starts).
  static void defer_to_step_boundary();
};

/// Under torchrun's agent (TORCHELASTIC_RUN_ID is set): the agent's pid, the parent of this process's session
/// leader (the agent starts each worker in a session of its own: torch.distributed.elastic's SubprocessHandler,
/// start_new_session), so that a wrapper script between the agent and ppctl does not hide it. nullopt without
/// the variable, or when /proc does not tell.
std::optional<pid_t> torchrun_agent_pid();

/// The local launcher's side: asks worker `pid` to stop at the next step boundary on behalf of `sig`
/// (sigqueue of SIGUSR1 carrying `sig`). Returns false when the worker no longer exists.
bool forward_stop_request(pid_t pid, int sig);

}  // namespace ppctl::launch
