// Local launcher: spawns one worker process per rank (fork + execve, never a shell) and supervises them.
// No torch: the rendezvous store is hosted by the caller and only its address is passed on.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ppctl::launch {

/// A failure as a worker reported it before exiting.
struct WorkerCause {
  int exit_code = 1;          ///< the code it exits with
  std::string text;           ///< one line, e.g. "checkpoint file .../block0.pt has 10 bytes where ..."
  bool peer_failure = false;  ///< a communication error, likely caused by another rank's failure
};

/// What to start and how.
struct LaunchOptions {
  int world_size = 1;                ///< number of workers (ranks 0..world_size-1); >= 1
  std::vector<std::string> argv;     ///< worker command: argv[0] is the executable path (absolute or relative, not searched in PATH)
  std::string master_addr = "127.0.0.1";  ///< put in MASTER_ADDR
  int master_port = 0;               ///< put in MASTER_PORT
  std::vector<std::pair<std::string, std::string>> extra_env;  ///< added to (or overriding) the inherited environment
  std::chrono::milliseconds grace{5000};  ///< after SIGTERM, how long workers get before SIGKILL
  /// Optional: by rank, the CPUs each worker is bound to (sched_setaffinity before execve; see
  /// cpu_placement.hpp); empty, or an empty entry, leaves a worker the launcher's own mask.
  std::vector<std::vector<int>> cpus;
  /// Optional: called once when a worker fails, before the others are stopped, with the ranks still
  /// running. Returns the running rank that stopped making progress and what it was last seen
  /// doing (e.g. from comm/progress_board.hpp), or nullopt; the result then blames that rank.
  std::function<std::optional<std::pair<int, std::string>>(const std::vector<int>& running)> find_stall;
  /// Optional: the failure rank `rank` reported itself (e.g. comm::FailureReport from the store), or
  /// nullopt. When set, a failure is blamed on the rank that failed on its own rather than on a peer
  /// that failed because of it (see run_workers), and the message carries its cause.
  std::function<std::optional<WorkerCause>(int rank)> cause_of;
  /// The workers stop at a step boundary by themselves on a stop signal (launch::WorkerSignalScope,
  /// train.on_signal): they start with kStopSignals blocked until their scope takes them, the first signal
  /// the launcher gets is forwarded to them (forward_stop_request), and a worker exiting with
  /// kExitStoppedResumable or 128 + that signal then has stopped, not failed. False: the launcher stops them
  /// itself (SIGTERM, then SIGKILL after `grace`) on the first signal.
  bool forward_stop_signals = false;
  /// With forward_stop_signals: the exit code rank `rank` has reported it stops with, once it has finished its
  /// stop (its checkpoint complete, its last collective done; comm::publish_stop), or nothing. A second signal
  /// that finds every running rank reported only hurries their exit: the job ends as if they had exited.
  std::function<std::optional<int>(int rank)> stopped_as;
};

/// How the job ended.
struct LaunchResult {
  int exit_code = 0;               ///< 0 when every worker exited 0; otherwise non-zero (see run_workers)
  std::optional<int> failed_rank;  ///< first rank that failed, if any
  std::string message;             ///< one line for the user, e.g. "rank 2 exited with code 1", or
                                   ///< "rank 1 stopped making progress: ...; then rank 0 exited with code 1"
  std::optional<int> stalled_rank; ///< the running rank find_stall blamed, if any
  bool interrupted = false;        ///< the launcher got a stop signal and the workers stopped (or were stopped)
  int stop_signal = 0;             ///< with forward_stop_signals: the signal every worker stopped on by itself
};

/// Spawns `world_size` workers with the inherited environment plus RANK, WORLD_SIZE, LOCAL_RANK,
/// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and extra_env. Each worker gets its own process group
/// (so a terminal Ctrl-C reaches only the launcher) and PR_SET_PDEATHSIG=SIGKILL (so it never
/// outlives the launcher). Supervises them:
/// - all exit 0 -> exit_code 0;
/// - one exits non-zero or is killed by a signal -> the others get SIGTERM, then SIGKILL after
///   `grace`; exit_code = that worker's code (128 + signal when killed), failed_rank set. With
///   `cause_of`, up to kSettleTime is first given for a rank to report its own (not peer_failure)
///   cause; the blamed rank is then, in order: a stalled rank (find_stall); a rank that reported its
///   own cause (failed_rank = it, exit_code = its code); among the ranks that ended, one that
///   reported nothing (killed) before one that reported a peer failure. The message is "rank R
///   exited with code C: CAUSE" (or "rank R failed: CAUSE" while it is still exiting);
/// - the launcher gets one of kStopSignals (also one caught by an enclosing StopSignalScope before the
///   call) -> without forward_stop_signals the same shutdown, exit_code 128 + signal, interrupted set; with
///   it the signal is forwarded, and once every worker has stopped by itself exit_code is theirs
///   (kExitStoppedResumable when they wrote a checkpoint) and stop_signal and interrupted are set; a second
///   signal meanwhile stops them as without the option, unless every rank still running has already reported
///   its stop (`stopped_as`): they are then ended and the result is the same as when they exit by themselves.
/// Returns only after every worker has been reaped (no orphans, no zombies).
/// Throws ppctl::LaunchError if a worker cannot be started (e.g. executable missing).
LaunchResult run_workers(const LaunchOptions& options);

/// How long run_workers waits, after a first failure, for the rank that caused it to report.
inline constexpr std::chrono::milliseconds kSettleTime{3000};

}  // namespace ppctl::launch
