// Local launcher: spawns the workers (fork + execve, no shell), supervises them and ends them all together.
#include "launch/launcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "core/error.hpp"
#include "launch/stop_signals.hpp"
#include "launch/worker_signals.hpp"

extern char** environ;

namespace ppctl::launch {
namespace {

using Clock = std::chrono::steady_clock;

/// How often the supervisor looks at its workers and at the signal flag. Short enough that a
/// failure or a Ctrl-C is acted on at once, long enough to cost nothing.
constexpr std::chrono::milliseconds kPollInterval{20};

/// Exit status of a child whose setup failed before execve (it also reports errno on the pipe).
constexpr int kChildSetupFailed = 127;

/// Set while a run_workers call is in progress: the signal handlers are process-wide, so two
/// concurrent calls would steal each other's signals.
std::atomic<bool> g_in_progress{false};

/// Rejects a second concurrent call for the lifetime of the guard.
class InProgressGuard {
 public:
  InProgressGuard() {
    if (g_in_progress.exchange(true))
      throw InternalError("run_workers called while another call is in progress in this process");
  }
  ~InProgressGuard() { g_in_progress = false; }
  InProgressGuard(const InProgressGuard&) = delete;
  InProgressGuard& operator=(const InProgressGuard&) = delete;
};

/// "Killed", "Terminated", ... (thread-safe where glibc offers sigdescr_np).
std::string signal_description(int sig) {
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 32)
  const char* text = sigdescr_np(sig);
#else
  const char* text = strsignal(sig);
#endif
  return text ? text : "unknown signal";
}

void sleep_for(std::chrono::milliseconds duration) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count();
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);  // a caught signal cuts it short, which is what we want
}

// --- Preparing the child's argv and environment (all allocation happens before fork) ----------

/// Strings plus the NULL-terminated char* array execve wants, pointing into them.
class CStringArray {
 public:
  explicit CStringArray(std::vector<std::string> strings) : strings_(std::move(strings)) {
    pointers_.reserve(strings_.size() + 1);
    for (auto& s : strings_) pointers_.push_back(s.data());
    pointers_.push_back(nullptr);
  }
  char* const* get() const { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

/// The inherited environment with `overrides` applied in order (a later entry wins); the order of
/// inherited variables is kept, new ones are appended.
std::vector<std::string> merged_environment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  std::unordered_map<std::string, size_t> index;  // variable name -> position in env
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string_view text(*entry);
    index.emplace(std::string(text.substr(0, text.find('='))), env.size());
    env.emplace_back(text);
  }
  for (const auto& [name, value] : overrides) {
    if (name.empty() || name.find('=') != std::string::npos)
      throw LaunchError(fmt::format("invalid environment variable name '{}' for the workers", name));
    std::string entry = name + "=" + value;
    const auto [it, inserted] = index.emplace(name, env.size());
    if (inserted)
      env.push_back(std::move(entry));
    else
      env[it->second] = std::move(entry);
  }
  return env;
}

/// The environment of worker `rank`: inherited + rendezvous variables + extra_env.
std::vector<std::string> worker_environment(const LaunchOptions& options, int rank) {
  std::vector<std::pair<std::string, std::string>> overrides = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(options.world_size)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.world_size)},
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(options.master_port)},
  };
  overrides.insert(overrides.end(), options.extra_env.begin(), options.extra_env.end());
  return merged_environment(overrides);
}

// --- Starting one worker -------------------------------------------------------------------------

/// Runs in the forked child: async-signal-safe calls only (no allocation, no locks, no logging).
/// On any failure writes errno to `error_fd` (close-on-exec, so the parent reads EOF on success).
[[noreturn]] void exec_in_child(char* const* argv, char* const* envp, int error_fd, pid_t launcher,
                                const cpu_set_t* cpus, bool block_stop_signals) {
  setpgid(0, 0);  // own process group: a terminal Ctrl-C reaches only the launcher
  // Best effort: a subset of the launcher's own mask; a worker left unbound still runs correctly.
  if (cpus != nullptr) (void)sched_setaffinity(0, sizeof *cpus, cpus);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    const int err = errno;
    (void)!write(error_fd, &err, sizeof err);
    _exit(kChildSetupFailed);
  }
  if (getppid() != launcher) _exit(kChildSetupFailed);  // the launcher died before prctl took hold

  // Start from a clean slate: default dispositions (an ignored SIGPIPE or SIGINT would survive
  // execve), no inherited descriptors but stdio and the error pipe, an empty signal mask.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
#ifdef SYS_close_range
  if (error_fd > 3) syscall(SYS_close_range, 3U, static_cast<unsigned>(error_fd - 1), 0U);
  syscall(SYS_close_range, static_cast<unsigned>(error_fd + 1), ~0U, 0U);
#endif
  sigset_t mask;  // empty, or the stop signals held until the worker's WorkerSignalScope takes them
  sigemptyset(&mask);
  if (block_stop_signals) mask = stop_signal_set();
  sigprocmask(SIG_SETMASK, &mask, nullptr);

  execve(argv[0], argv, envp);
  const int err = errno;
  (void)!write(error_fd, &err, sizeof err);
  _exit(kChildSetupFailed);
}

std::string start_error(int rank, const std::string& what, int err) {
  return fmt::format("cannot start worker for rank {}: {}: {}", rank, what,
                     std::generic_category().message(err));
}

/// Forks and execs one worker; returns its pid once execve has succeeded (so its process group
/// exists), bound to `cpus` when not empty. Throws LaunchError, with nothing left running, when fork
/// or execve fails.
pid_t start_worker(int rank, const CStringArray& argv, const CStringArray& envp, pid_t launcher,
                   const std::vector<int>& cpus, bool block_stop_signals) {
  cpu_set_t mask;  // prepared before fork: the child only makes the call
  CPU_ZERO(&mask);
  for (int cpu : cpus)
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &mask);
  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) throw LaunchError(start_error(rank, "pipe", errno));

  // Block every signal across fork so the child cannot run the launcher's handlers before it has
  // reset them; the parent's mask is restored right after.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid = fork();
  if (pid == 0)
    exec_in_child(argv.get(), envp.get(), error_pipe[1], launcher, cpus.empty() ? nullptr : &mask, block_stop_signals);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  close(error_pipe[1]);

  if (pid < 0) {
    close(error_pipe[0]);
    throw LaunchError(start_error(rank, "fork", fork_errno));
  }
  int child_errno = 0;
  ssize_t n;
  do n = read(error_pipe[0], &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  close(error_pipe[0]);
  if (n > 0) {  // the child reported why it could not exec, then exited
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    throw LaunchError(start_error(rank, argv.get()[0], child_errno));
  }
  return pid;
}

// --- Supervising the running workers -------------------------------------------------------------

/// "exited with code 3" / "was killed by signal 9 (Killed)".
std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  const int sig = WTERMSIG(status);
  return fmt::format("was killed by signal {} ({})", sig, signal_description(sig));
}

/// The launcher's exit code for a worker's wait status: its code, or 128 + signal.
int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Ended {
  int rank;
  int status;  ///< as from waitpid
};

/// The started workers, each leading its own process group. Its destructor SIGKILLs and reaps
/// whatever still runs, so no path out of run_workers (a failed start, an exception) leaves orphans.
class Workers {
 public:
  Workers() = default;
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;
  ~Workers() {
    if (running_ == 0) return;
    signal_running(SIGKILL);
    while (running_ > 0) {
      poll();
      sleep_for(kPollInterval);
    }
  }

  void add(int rank, pid_t pid) {
    workers_.push_back({rank, pid, true});
    ++running_;
  }
  int running() const { return running_; }
  /// The ranks still running, in rank order.
  std::vector<int> running_ranks() const {
    std::vector<int> ranks;
    for (const auto& w : workers_)
      if (w.running) ranks.push_back(w.rank);
    return ranks;
  }
  int started() const { return static_cast<int>(workers_.size()); }

  /// Reaps the workers that have ended, without blocking; returns the first failure among them.
  std::optional<Ended> poll() {
    std::optional<Ended> failure;
    for (auto& w : workers_) {
      if (!w.running) continue;
      // Peek first (WNOWAIT): while the zombie holds its pid, the process-group id cannot be reused,
      // so killing what the worker left behind in its group cannot hit an unrelated process.
      siginfo_t info{};
      if (waitid(P_PID, static_cast<id_t>(w.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
        if (errno == ECHILD) {  // reaped behind our back (e.g. a waitpid(-1) elsewhere): status lost
          spdlog::warn("rank {} (pid {}) was reaped outside the launcher: exit status unknown",
                       w.rank, w.pid);
          w.running = false;
          --running_;
        }
        continue;
      }
      if (info.si_pid == 0) continue;  // still running
      kill(-w.pid, SIGKILL);
      int status = 0;
      while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
      }
      w.running = false;
      --running_;
      const bool stopped = WIFEXITED(status) && std::find(stopped_codes_.begin(), stopped_codes_.end(),
                                                          WEXITSTATUS(status)) != stopped_codes_.end();
      if (stopped) stopped_code_ = WEXITSTATUS(status);
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !stopped;
      if (failed) failed_.push_back(Ended{w.rank, status});
      if (failed && !failure) failure = Ended{w.rank, status};
    }
    return failure;
  }

  /// Every failure reaped so far, in the order seen.
  const std::vector<Ended>& failed() const { return failed_; }

  /// From now on a worker exiting with one of `codes` has stopped as asked, not failed.
  void accept_stop_codes(std::vector<int> codes) { stopped_codes_ = std::move(codes); }
  /// Whether a worker exiting with `code` now has stopped as asked (accept_stop_codes).
  bool accepts_stop_code(int code) const {
    return std::find(stopped_codes_.begin(), stopped_codes_.end(), code) != stopped_codes_.end();
  }
  /// The code of the last worker that stopped as asked (or was ended after reporting one: note_stopped);
  /// 0 when none.
  int stopped_code() const { return stopped_code_; }
  /// Records `code` as the stop code (workers ended after they reported stopping: all_reported_stop).
  void note_stopped(int code) { stopped_code_ = code; }

  /// Asks every running worker to stop at its next step boundary on behalf of `sig`.
  void forward_stop(int sig) const {
    for (const auto& w : workers_)
      if (w.running) forward_stop_request(w.pid, sig);
  }

  /// Sends `sig` to the process group of every running worker.
  void signal_running(int sig) const {
    for (const auto& w : workers_)
      if (w.running && kill(-w.pid, sig) != 0 && errno == ESRCH) kill(w.pid, sig);
  }

  /// SIGTERM to every running worker, SIGKILL to those still running after `grace` (at once if the
  /// launcher gets another SIGINT/SIGTERM meanwhile); returns when all are reaped. SIGCONT follows
  /// the SIGTERM, so a stopped (SIGSTOP) worker acts on it at once instead of waiting for SIGKILL.
  void stop(std::chrono::milliseconds grace) {
    signal_running(SIGTERM);
    signal_running(SIGCONT);
    auto deadline = Clock::now() + grace;
    const int signals_seen = StopSignalScope::count();
    bool killed = false;
    while (running_ > 0) {
      poll();
      if (running_ == 0) break;
      if (StopSignalScope::count() != signals_seen) deadline = Clock::now();
      if (!killed && Clock::now() >= deadline) {
        spdlog::warn("{} worker(s) still running {} ms after SIGTERM: sending SIGKILL", running_,
                     grace.count());
        signal_running(SIGKILL);
        killed = true;
      }
      sleep_for(kPollInterval);
    }
  }

 private:
  struct Worker {
    int rank;
    pid_t pid;
    bool running;
  };
  std::vector<Worker> workers_;
  std::vector<Ended> failed_;
  std::vector<int> stopped_codes_;
  int stopped_code_ = 0;
  int running_ = 0;
};

/// The rank a failure is blamed on (see run_workers): its wait status when it has ended, its report.
struct Blame {
  int rank = 0;
  std::optional<int> status;
  std::optional<WorkerCause> cause;
};

/// Every rank's own report, from `cause_of` (nothing without it).
std::vector<std::optional<WorkerCause>> reported_causes(const LaunchOptions& options) {
  std::vector<std::optional<WorkerCause>> causes(static_cast<size_t>(options.world_size));
  if (!options.cause_of) return causes;
  for (int rank = 0; rank < options.world_size; ++rank) causes[static_cast<size_t>(rank)] = options.cause_of(rank);
  return causes;
}

bool has_own_cause(const std::vector<std::optional<WorkerCause>>& causes) {
  return std::any_of(causes.begin(), causes.end(), [](const auto& c) { return c && !c->peer_failure; });
}

/// A rank that reported its own cause (one that has ended before one still exiting); else, among the
/// ended ranks, one that reported nothing (it was killed) before one that reported a peer failure.
Blame choose_blame(const std::vector<Ended>& ended, const std::vector<std::optional<WorkerCause>>& causes) {
  const auto status_of = [&](int rank) -> std::optional<int> {
    for (const auto& e : ended)
      if (e.rank == rank) return e.status;
    return std::nullopt;
  };
  for (const bool ended_only : {true, false}) {  // one that has ended first: its exit code is known
    for (size_t rank = 0; rank < causes.size(); ++rank) {
      const auto status = status_of(static_cast<int>(rank));
      if (causes[rank] && !causes[rank]->peer_failure && (status || !ended_only))
        return {static_cast<int>(rank), status, causes[rank]};
    }
  }
  for (const auto& e : ended)
    if (!causes.at(static_cast<size_t>(e.rank))) return {e.rank, e.status, std::nullopt};
  return {ended.front().rank, ended.front().status, causes.at(static_cast<size_t>(ended.front().rank))};
}

/// "1 worker", "4 workers".
std::string count_text(int n, const char* noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

/// When every running worker has reported (options.stopped_as) that it finished its stop with a code the
/// launcher accepts as a stop, so that it is only exiting: the code the job ends with (kExitStoppedResumable
/// only when every worker, exited or reported, stopped with a checkpoint). Nothing otherwise.
std::optional<int> all_reported_stop(const Workers& workers, const LaunchOptions& options) {
  if (!options.stopped_as) return std::nullopt;
  int code = workers.stopped_code() != 0 ? workers.stopped_code() : kExitStoppedResumable;
  for (const int rank : workers.running_ranks()) {
    const auto reported = options.stopped_as(rank);
    if (!reported || !workers.accepts_stop_code(*reported)) return std::nullopt;
    if (*reported != kExitStoppedResumable) code = *reported;
  }
  return code;
}

/// The result of a job whose workers all stopped on the forwarded signal `forwarded`: their stop code
/// (kExitStoppedResumable when they wrote a checkpoint), logged.
LaunchResult stopped_result(const Workers& workers, int forwarded) {
  LaunchResult result;
  result.exit_code = workers.stopped_code();
  result.stop_signal = forwarded;
  result.interrupted = true;
  result.message = fmt::format("interrupted ({}): {} stopped, {}", stop_signal_name(forwarded),
                               workers.started() == 1 ? std::string("the worker")
                                                      : fmt::format("all {} workers", workers.started()),
                               result.exit_code == kExitStoppedResumable
                                   ? fmt::format("with a checkpoint (exit code {}: resumable with --resume auto)",
                                                 kExitStoppedResumable)
                                   : std::string("without a checkpoint"));
  spdlog::warn("{}", result.message);
  return result;
}

}  // namespace

LaunchResult run_workers(const LaunchOptions& options) {
  if (options.world_size < 1)
    throw LaunchError(fmt::format("world size must be at least 1, got {}", options.world_size));
  if (options.argv.empty() || options.argv[0].empty())
    throw LaunchError("no worker command given");

  InProgressGuard in_progress;
  const CStringArray argv(options.argv);
  std::vector<CStringArray> envs;
  envs.reserve(options.world_size);
  for (int rank = 0; rank < options.world_size; ++rank)
    envs.emplace_back(worker_environment(options, rank));

  const StopSignalScope stop_signals;
  Workers workers;
  const pid_t launcher = getpid();
  for (int rank = 0; rank < options.world_size; ++rank) {
    pid_t pid;
    try {
      pid = start_worker(rank, argv, envs[rank], launcher,
                         static_cast<size_t>(rank) < options.cpus.size() ? options.cpus[static_cast<size_t>(rank)]
                                                                         : std::vector<int>{},
                         options.forward_stop_signals);
    } catch (const LaunchError&) {
      workers.stop(options.grace);
      throw;
    }
    workers.add(rank, pid);
  }
  spdlog::info("started {} worker{}: {}", options.world_size, options.world_size == 1 ? "" : "s",
               fmt::join(options.argv, " "));

  LaunchResult result;
  int forwarded = 0;  // the signal forwarded to the workers (forward_stop_signals), and how many were caught then
  int caught_then = 0;
  while (workers.running() > 0) {
    if (const int sig = StopSignalScope::caught(); options.forward_stop_signals && sig != 0 && forwarded == 0) {
      forwarded = sig;
      caught_then = StopSignalScope::count();
      spdlog::warn("interrupted ({}): asking {} to stop at the next step boundary (train.on_signal; "
                   "another signal stops them at once)",
                   stop_signal_name(sig), count_text(workers.running(), "worker"));
      workers.accept_stop_codes({kExitStoppedResumable, 128 + sig});
      workers.forward_stop(sig);
    }
    if (const int sig = StopSignalScope::caught(); sig != 0 && (forwarded == 0 || StopSignalScope::count() > caught_then)) {
      const int running = workers.running();
      if (const auto code = forwarded != 0 ? all_reported_stop(workers, options) : std::nullopt) {
        // Every rank still running has finished its stop (checkpoint and last collective done) and is only
        // exiting: ending them loses nothing, and the job ends as their own exits would have ended it.
        spdlog::warn("interrupted again ({}): the {} still exiting had already stopped; ending {}",
                     stop_signal_name(sig), count_text(running, "worker"), running == 1 ? "it" : "them");
        workers.stop(options.grace);
        workers.note_stopped(*code);
        return stopped_result(workers, forwarded);
      }
      spdlog::warn("interrupted ({}): stopping {}", stop_signal_name(sig), count_text(running, "worker"));
      workers.stop(options.grace);
      result.exit_code = 128 + sig;
      result.message =
          fmt::format("interrupted ({}): stopped {}", stop_signal_name(sig), count_text(running, "worker"));
      result.interrupted = true;
      return result;
    }
    if (const auto failure = workers.poll()) {
      result.exit_code = exit_code_of(failure->status);
      result.failed_rank = failure->rank;
      result.message = fmt::format("rank {} {}", failure->rank, describe_status(failure->status));
      std::optional<std::pair<int, std::string>> stall;
      if (options.find_stall) stall = options.find_stall(workers.running_ranks());  // before any stop
      if (stall) {
        result.stalled_rank = stall->first;
        result.message = fmt::format("rank {} stopped making progress: {}; then {}", stall->first,
                                     stall->second, result.message);
      } else if (options.cause_of) {
        // The rank that caused the failure may still be on its way out (its peers see its
        // connections close first): give it a moment to report, then blame it.
        auto causes = reported_causes(options);
        for (const auto until = Clock::now() + kSettleTime;
             !has_own_cause(causes) && workers.running() > 0 && Clock::now() < until;
             causes = reported_causes(options)) {
          sleep_for(kPollInterval);
          workers.poll();
        }
        const auto blame = choose_blame(workers.failed(), causes);
        result.failed_rank = blame.rank;
        result.exit_code = blame.status ? exit_code_of(*blame.status) : blame.cause->exit_code;
        result.message = fmt::format("rank {} {}{}", blame.rank,
                                     blame.status ? describe_status(*blame.status) : "failed",
                                     blame.cause ? ": " + blame.cause->text : "");
      }
      if (workers.running() > 0) {
        spdlog::error("{}: stopping the other {} worker{}", result.message, workers.running(),
                      workers.running() == 1 ? "" : "s");
      } else {
        spdlog::error("{}; the other workers have ended too", result.message);
      }
      workers.stop(options.grace);
      return result;
    }
    sleep_for(kPollInterval);
  }
  if (forwarded != 0 && workers.stopped_code() != 0) return stopped_result(workers, forwarded);
  result.message = workers.started() == 1 ? std::string("the worker finished")
                                          : fmt::format("all {} workers finished", workers.started());
  spdlog::info("{}", result.message);
  return result;
}

}  // namespace ppctl::launch
