// Catching the stop signals (SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2) into a flag for the launcher's
// lifetime (nested scopes), and their names.
#include "launch/stop_signals.hpp"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <iterator>

namespace ppctl::launch {
namespace {

/// Written by the handler, read by the polling launcher: lock-free atomics are async-signal-safe.
std::atomic<int> g_caught_signal{0};
std::atomic<int> g_caught_count{0};
static_assert(std::atomic<int>::is_always_lock_free);

int g_depth = 0;  ///< live scopes (changed on the launcher's thread only)
struct sigaction g_old[std::size(kStopSignals)] {};
struct sigaction g_old_chld {};

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  g_caught_signal.compare_exchange_strong(none, sig);
  g_caught_count.fetch_add(1);
}

}  // namespace

StopSignalScope::StopSignalScope() {
  if (g_depth++ > 0) return;
  g_caught_signal = 0;
  g_caught_count = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // other threads (e.g. a store server) keep working undisturbed
  for (size_t k = 0; k < std::size(kStopSignals); ++k) sigaction(kStopSignals[k], &action, &g_old[k]);
  // A signal held by hold_stop_signals (e.g. one that came while LibTorch was loading) reaches the handler now.
  const sigset_t stop = stop_signal_set();
  pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
  // With SIGCHLD ignored (or SA_NOCLDWAIT) the kernel reaps children itself and their exit
  // statuses are lost: use the default disposition while the scope lives.
  sigaction(SIGCHLD, nullptr, &g_old_chld);
  if (g_old_chld.sa_handler == SIG_IGN || (g_old_chld.sa_flags & SA_NOCLDWAIT)) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGCHLD, &dfl, nullptr);
  }
}

StopSignalScope::~StopSignalScope() {
  if (--g_depth > 0) return;
  for (size_t k = 0; k < std::size(kStopSignals); ++k) sigaction(kStopSignals[k], &g_old[k], nullptr);
  sigaction(SIGCHLD, &g_old_chld, nullptr);
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (const int sig : kStopSignals) sigaddset(&set, sig);
  return set;
}

void hold_stop_signals() {
  const sigset_t stop = stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
}

int StopSignalScope::caught() { return g_caught_signal.load(); }
int StopSignalScope::count() { return g_caught_count.load(); }

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "a stop signal";
  }
}

}  // namespace ppctl::launch
