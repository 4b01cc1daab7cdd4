// A worker's stop signals (worker_signals.hpp): the handler only writes pre-formatted lines, stores an
// atomic and, for a second signal, re-raises it with the default action.
#include "launch/worker_signals.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "launch/stop_signals.hpp"

namespace ppctl::launch {
namespace {

std::atomic<int> g_caught{0};
std::atomic<int> g_count{0};
pid_t g_launcher = 0;  ///< set before the handlers are installed, read-only afterwards
pid_t g_agent = 0;     ///< likewise: torchrun's agent, 0 when none

/// The lines the handler writes, formatted before it is installed (no allocation in the handler).
struct Lines {
  std::string first[std::size(kStopSignals)];
  std::string again[std::size(kStopSignals)];
  std::string early[std::size(kStopSignals)];
};
Lines g_lines;
struct sigaction g_old[std::size(kStopSignals)] {};

int slot_of(int sig) {
  for (size_t k = 0; k < std::size(kStopSignals); ++k)
    if (kStopSignals[k] == sig) return static_cast<int>(k);
  return -1;
}

void write_line(const std::string& line) { (void)!write(STDERR_FILENO, line.data(), line.size()); }

/// Ends the process by `sig`'s default action once the handler returns (the signal is blocked in it).
void die_by(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

std::atomic<bool> g_first_forwarded{false};
std::atomic<bool> g_first_from_agent{false};  ///< the first stop signal came from torchrun's agent
std::atomic<bool> g_agent_copy_seen{false};   ///< the other side's copy of it (agent or not) came too
std::atomic<bool> g_training{false};  ///< defer_to_step_boundary was called

extern "C" void on_worker_signal(int sig, siginfo_t* info, void*) {
  const bool from_launcher = g_launcher != 0 && info != nullptr && info->si_pid == g_launcher;
  if (from_launcher && sig == SIGTERM) return die_by(sig);  // the launcher ends the job
  const bool forwarded = from_launcher && sig == SIGUSR1 && info->si_code == SI_QUEUE &&
                         slot_of(info->si_value.sival_int) >= 0;
  const int what = forwarded ? info->si_value.sival_int : sig;
  const int slot = slot_of(what);
  if (slot < 0) return;
  const bool from_agent = g_agent != 0 && info != nullptr && info->si_pid == g_agent;
  if (g_count.fetch_add(1) > 0) {
    // One event may reach both the launcher (which forwards it) and this worker (e.g. a signal to every
    // process of a Slurm step): a forwarded copy, or the signal itself after its forwarded copy, is the same
    // request; under torchrun, the agent's copy and the direct one, once. Anything else is a second request:
    // end now.
    if (forwarded || (g_first_forwarded.load() && what == g_caught.load())) return;
    if (g_agent != 0 && what == g_caught.load() && from_agent != g_first_from_agent.load() &&
        !g_agent_copy_seen.exchange(true))
      return;
    write_line(g_lines.again[slot]);
    return die_by(sig);
  }
  if (!g_training.load()) {  // set-up, a rendezvous: nothing to checkpoint yet, and no step to wait for
    write_line(g_lines.early[slot]);
    _exit(128 + what);
  }
  g_first_forwarded = forwarded;
  g_first_from_agent = from_agent;
  g_caught.store(what);
  write_line(g_lines.first[slot]);
}

}  // namespace

WorkerSignalScope::WorkerSignalScope(std::optional<int> rank, std::optional<pid_t> launcher,
                                     std::optional<pid_t> agent) {
  const std::string prefix = rank ? fmt::format("[rank {}] ", *rank) : std::string();
  for (size_t k = 0; k < std::size(kStopSignals); ++k) {
    const char* name = stop_signal_name(kStopSignals[k]);
    g_lines.first[k] = fmt::format(
        "{}warning: got {}{}: the job stops at the next step boundary, with a checkpoint unless "
        "train.on_signal is stop (another signal ends this process at once)\n",
        prefix, name, launcher ? " (forwarded by the launcher)" : "");
    g_lines.again[k] = fmt::format(
        "{}warning: got {} again: exiting now; the checkpoint being written, if any, is dropped and "
        "`latest` keeps naming the previous complete one\n",
        prefix, name);
    g_lines.early[k] = fmt::format("{}warning: got {}{} before training started: exiting (exit code {}), nothing to "
                                   "checkpoint yet\n",
                                   prefix, name, launcher ? " (forwarded by the launcher)" : "", 128 + kStopSignals[k]);
  }
  g_launcher = launcher.value_or(0);
  g_agent = agent.value_or(0);
  g_first_from_agent = false;
  g_agent_copy_seen = false;
  g_caught = 0;
  g_count = 0;
  g_first_forwarded = false;
  g_training = false;
  struct sigaction action {};
  action.sa_sigaction = on_worker_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  for (size_t k = 0; k < std::size(kStopSignals); ++k) sigaction(kStopSignals[k], &action, &g_old[k]);
  // The local launcher starts its workers with these blocked, and the light ppctl holds them across its exec
  // for `train` (hold_stop_signals): a request before this point stays pending and is delivered now.
  const sigset_t stop = stop_signal_set();
  pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
}

WorkerSignalScope::~WorkerSignalScope() {
  for (size_t k = 0; k < std::size(kStopSignals); ++k) sigaction(kStopSignals[k], &g_old[k], nullptr);
}

int WorkerSignalScope::caught() { return g_caught.load(); }

void WorkerSignalScope::defer_to_step_boundary() { g_training = true; }

std::optional<pid_t> torchrun_agent_pid() {
  if (std::getenv("TORCHELASTIC_RUN_ID") == nullptr) return std::nullopt;
  const pid_t leader = getsid(0);
  if (leader == getpid()) return getppid();
  if (leader <= 0) return std::nullopt;
  // /proc/PID/stat: "pid (comm) state ppid ...", comm may hold spaces and parentheses: read after the last ')'.
  std::ifstream stat(fmt::format("/proc/{}/stat", leader));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  std::string state;
  pid_t parent = 0;
  if (!(fields >> state >> parent) || parent <= 1) return std::nullopt;
  return parent;
}

bool forward_stop_request(pid_t pid, int sig) {
  union sigval value {};
  value.sival_int = sig;
  return sigqueue(pid, SIGUSR1, value) == 0;
}

}  // namespace ppctl::launch
