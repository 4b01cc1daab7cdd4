// Tests of launch::run_workers: environment, exit codes, failure shutdown, signals, start errors.
// Workers are /bin/true or this test binary re-executed in "worker mode" (see run_as_test_worker).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_exception.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "launch/cpu_placement.hpp"
#include "launch/launcher.hpp"
#include "launch/stop_signals.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Catch::Matchers::ContainsSubstring;
using ppctl::launch::LaunchOptions;
using ppctl::launch::LaunchResult;
using ppctl::launch::run_workers;

namespace {

constexpr const char* kWorkerFlag = "--launcher-test-worker";

fs::path report_path(const fs::path& dir, int rank) {
  return dir / ("rank-" + std::to_string(rank) + ".report");
}

/// Waits until every rank 0..world_size-1 has written its report; false after `timeout`.
bool wait_for_reports(const fs::path& dir, int world_size, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool all = true;
    for (int rank = 0; rank < world_size; ++rank) all = all && fs::exists(report_path(dir, rank));
    if (all) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
}

// --- Worker mode ---------------------------------------------------------------------------------

/// Writes what the worker sees to DIR/rank-R.report (atomically, via rename): its environment as
/// NAME=VALUE lines, then its process state as @key=value lines.
void write_report(const fs::path& dir, int rank) {
  std::ostringstream out;
  for (char** entry = environ; *entry; ++entry) out << *entry << '\n';
  out << "@pid=" << getpid() << "\n@pgrp=" << getpgrp() << '\n';
  int pdeathsig = 0;
  prctl(PR_GET_PDEATHSIG, &pdeathsig);
  out << "@pdeathsig=" << pdeathsig << '\n';
  struct sigaction pipe_action {};
  sigaction(SIGPIPE, nullptr, &pipe_action);
  out << "@sigpipe=" << (pipe_action.sa_handler == SIG_DFL ? "default" : "changed") << '\n';
  sigset_t mask;
  sigprocmask(SIG_BLOCK, nullptr, &mask);
  out << "@blocked=";
  for (int sig = 1; sig < 32; ++sig)
    if (sigismember(&mask, sig)) out << sig << ' ';
  out << "\n@fds=";
  if (DIR* fds = opendir("/proc/self/fd")) {
    while (const dirent* entry = readdir(fds)) {
      if (entry->d_name[0] == '.' || std::atoi(entry->d_name) == dirfd(fds)) continue;
      out << entry->d_name << ' ';
    }
    closedir(fds);
  }
  out << "\n@cpus=";
  for (int cpu : ppctl::launch::usable_cpus()) out << cpu << ' ';
  out << '\n';
  const fs::path path = report_path(dir, rank);
  std::ofstream(path.string() + ".tmp") << out.str();
  fs::rename(path.string() + ".tmp", path);
}

/// Worker mode: `SELF --launcher-test-worker DIR ACTION_0 ACTION_1 ...`; rank R reports (see
/// write_report) and then does ACTION_R:
///   exit:N      once every rank has reported, exit with code N
///   raise:N     once every rank has reported, raise signal N
///   sleep       sleep 60 s
///   ignore-term ignore SIGTERM (before reporting), then sleep 60 s
///   stop        stop itself (SIGSTOP), as a frozen rank; once continued sleep 60 s
[[noreturn]] void run_as_test_worker(const std::vector<std::string>& args) {
  const fs::path dir = args.at(2);
  const int rank = std::atoi(std::getenv("RANK"));
  const int world_size = std::atoi(std::getenv("WORLD_SIZE"));
  const std::string action = args.at(3 + rank);
  if (action == "ignore-term") signal(SIGTERM, SIG_IGN);
  write_report(dir, rank);
  if (action == "stop") raise(SIGSTOP);
  if (action == "sleep" || action == "ignore-term" || action == "stop") {
    std::this_thread::sleep_for(60s);
    std::_Exit(0);
  }
  const auto colon = action.find(':');
  const int number = std::atoi(action.c_str() + colon + 1);
  if (!wait_for_reports(dir, world_size, 10s)) std::_Exit(90);
  if (action.compare(0, colon, "raise") == 0) raise(number);
  std::_Exit(number);
}

/// Runs before Catch2's main: turns this process into a test worker when asked to by argv.
const bool kIsWorker = [] {
  std::vector<std::string> args;
  {
    std::ifstream cmdline("/proc/self/cmdline");  // closed before the worker reports its fds
    for (std::string arg; std::getline(cmdline, arg, '\0');) args.push_back(arg);
  }
  if (args.size() > 1 && args[1] == kWorkerFlag) run_as_test_worker(args);
  return false;
}();

// --- Test-side helpers ---------------------------------------------------------------------------

/// A fresh directory under the system temp dir, removed with its contents at the end of scope.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ppctl-launch-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

/// A job of this binary in worker mode, one action per rank, reports written to `dir`.
LaunchOptions worker_job(const fs::path& dir, const std::vector<std::string>& actions) {
  LaunchOptions options;
  options.world_size = static_cast<int>(actions.size());
  options.argv = {fs::read_symlink("/proc/self/exe").string(), kWorkerFlag, dir.string()};
  options.argv.insert(options.argv.end(), actions.begin(), actions.end());
  return options;
}

/// A rank's report as NAME -> VALUE (a multimap, so duplicate variables can be counted).
std::multimap<std::string, std::string> read_report(const fs::path& dir, int rank) {
  std::multimap<std::string, std::string> report;
  std::ifstream in(report_path(dir, rank));
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    report.emplace(line.substr(0, eq), eq == std::string::npos ? "" : line.substr(eq + 1));
  }
  return report;
}

std::string value_of(const std::multimap<std::string, std::string>& report, const std::string& key) {
  const auto it = report.find(key);
  return it == report.end() ? "<missing>" : it->second;
}

/// True when no process of the group `pgid` exists any more.
bool group_gone(pid_t pgid) { return kill(-pgid, 0) == -1 && errno == ESRCH; }

/// Checks that the workers that reported in `dir` are gone, group and all, and nothing is left to reap.
void check_no_worker_left(const fs::path& dir, int world_size) {
  for (int rank = 0; rank < world_size; ++rank) {
    const std::string pid = value_of(read_report(dir, rank), "@pid");
    INFO("rank " << rank << " pid " << pid);
    REQUIRE(pid != "<missing>");
    CHECK(group_gone(std::stoi(pid)));
  }
  CHECK(waitpid(-1, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// True once process `pid` is stopped (state T in /proc/PID/stat), false after `timeout`.
bool wait_until_stopped(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T') return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

bool same_disposition(const struct sigaction& a, const struct sigaction& b) {
  return a.sa_handler == b.sa_handler && a.sa_flags == b.sa_flags;
}

}  // namespace

TEST_CASE("all workers exit 0: exit code 0, repeatable, from any thread, handlers restored") {
  struct sigaction int_before {}, term_before {}, int_after {}, term_after {};
  sigaction(SIGINT, nullptr, &int_before);
  sigaction(SIGTERM, nullptr, &term_before);

  LaunchOptions options;
  options.world_size = 3;
  options.argv = {"/bin/true"};
  const LaunchResult first = run_workers(options);
  CHECK(first.exit_code == 0);
  CHECK_FALSE(first.failed_rank.has_value());
  CHECK(first.message == "all 3 workers finished");

  LaunchResult second;
  std::thread([&] { second = run_workers(options); }).join();
  CHECK(second.exit_code == 0);
  CHECK(second.message == "all 3 workers finished");

  sigaction(SIGINT, nullptr, &int_after);
  sigaction(SIGTERM, nullptr, &term_after);
  CHECK(same_disposition(int_before, int_after));
  CHECK(same_disposition(term_before, term_after));
  CHECK(waitpid(-1, nullptr, WNOHANG) == -1);
}

TEST_CASE("workers get the rank variables, extra_env and a clean process state") {
  TempDir dir;
  LaunchOptions options = worker_job(dir.path, {"exit:0", "exit:0"});
  options.master_addr = "10.1.2.3";
  options.master_port = 29555;
  options.extra_env = {{"PPCTL_TEST_EXTRA", "extra"}, {"PPCTL_TEST_OVERRIDDEN", "child"}};

  // State the workers must not inherit: an ignored SIGPIPE, a blocked SIGUSR1, a descriptor
  // without close-on-exec. Inherited: the environment.
  setenv("PPCTL_TEST_INHERITED", "parent", 1);
  setenv("PPCTL_TEST_OVERRIDDEN", "parent", 1);
  struct sigaction ignore {}, old_pipe {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old_pipe);
  sigset_t usr1, old_mask;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, &old_mask);
  int leaked[2];
  REQUIRE(pipe(leaked) == 0);

  const LaunchResult result = run_workers(options);

  close(leaked[0]);
  close(leaked[1]);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGPIPE, &old_pipe, nullptr);
  unsetenv("PPCTL_TEST_INHERITED");
  unsetenv("PPCTL_TEST_OVERRIDDEN");

  REQUIRE(result.exit_code == 0);
  CHECK(result.message == "all 2 workers finished");
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    const auto report = read_report(dir.path, rank);
    CHECK(value_of(report, "RANK") == std::to_string(rank));
    CHECK(value_of(report, "LOCAL_RANK") == std::to_string(rank));
    CHECK(value_of(report, "WORLD_SIZE") == "2");
    CHECK(value_of(report, "LOCAL_WORLD_SIZE") == "2");
    CHECK(value_of(report, "MASTER_ADDR") == "10.1.2.3");
    CHECK(value_of(report, "MASTER_PORT") == "29555");
    CHECK(value_of(report, "PPCTL_TEST_EXTRA") == "extra");
    CHECK(value_of(report, "PPCTL_TEST_INHERITED") == "parent");
    CHECK(value_of(report, "PPCTL_TEST_OVERRIDDEN") == "child");
    CHECK(report.count("PPCTL_TEST_OVERRIDDEN") == 1);
    CHECK(report.count("RANK") == 1);
    CHECK(value_of(report, "@pgrp") == value_of(report, "@pid"));  // own process group
    CHECK(value_of(report, "@pdeathsig") == std::to_string(SIGKILL));
    CHECK(value_of(report, "@sigpipe") == "default");
    CHECK(value_of(report, "@blocked").empty());
    std::istringstream fds(value_of(report, "@fds"));
    for (int fd; fds >> fd;) CHECK(fd < 3);  // stdio only
  }
}

TEST_CASE("options.cpus binds each worker to its CPUs; without it a worker keeps the launcher's mask") {
  const auto mine = ppctl::launch::usable_cpus();
  REQUIRE(!mine.empty());
  const auto listed = [](const std::vector<int>& cpus) {
    std::string text;
    for (int cpu : cpus) text += std::to_string(cpu) + ' ';
    return text;
  };
  TempDir dir;
  LaunchOptions options = worker_job(dir.path, {"exit:0", "exit:0", "exit:0"});
  // Rank 0 on the first CPU, rank 1 on the last, rank 2 not bound.
  options.cpus = {{mine.front()}, {mine.back()}};
  REQUIRE(run_workers(options).exit_code == 0);
  CHECK(value_of(read_report(dir.path, 0), "@cpus") == listed({mine.front()}));
  CHECK(value_of(read_report(dir.path, 1), "@cpus") == listed({mine.back()}));
  CHECK(value_of(read_report(dir.path, 2), "@cpus") == listed(mine));
}

TEST_CASE("a worker exiting non-zero stops the others and sets the exit code") {
  TempDir dir;
  LaunchOptions options = worker_job(dir.path, {"sleep", "sleep", "exit:3"});
  options.grace = 10s;  // the sleepers honour SIGTERM, so the grace must not be waited out

  const auto start = std::chrono::steady_clock::now();
  const LaunchResult result = run_workers(options);
  CHECK(seconds_since(start) < 5.0);
  CHECK(result.exit_code == 3);
  CHECK(result.failed_rank == 2);
  CHECK(result.message == "rank 2 exited with code 3");
  check_no_worker_left(dir.path, 3);
}

TEST_CASE("a worker killed by a signal gives 128 + signal") {
  TempDir dir;
  LaunchOptions options = worker_job(dir.path, {"sleep", "raise:9"});

  const LaunchResult result = run_workers(options);
  CHECK(result.exit_code == 128 + SIGKILL);
  CHECK(result.failed_rank == 1);
  CHECK(result.message == "rank 1 was killed by signal 9 (Killed)");
  check_no_worker_left(dir.path, 2);
}

TEST_CASE("a worker ignoring SIGTERM is SIGKILLed after the grace period") {
  TempDir dir;
  LaunchOptions options = worker_job(dir.path, {"ignore-term", "exit:5"});
  options.grace = 300ms;

  const auto start = std::chrono::steady_clock::now();
  const LaunchResult result = run_workers(options);
  const double elapsed = seconds_since(start);
  CHECK(elapsed >= 0.3);
  CHECK(elapsed < 5.0);
  CHECK(result.exit_code == 5);
  CHECK(result.failed_rank == 1);
  CHECK_THAT(result.message, ContainsSubstring("rank 1 exited with code 5"));
  check_no_worker_left(dir.path, 2);
}

TEST_CASE("SIGINT or SIGTERM to the launcher stops every worker") {
  const int sig = GENERATE(SIGINT, SIGTERM);
  const std::string name = sig == SIGINT ? "SIGINT" : "SIGTERM";
  INFO(name);
  TempDir dir;
  LaunchOptions options = worker_job(dir.path, {"sleep", "sleep"});

  // From another thread, as a terminal or a job scheduler would: the process is multi-threaded.
  std::thread sender([&] {
    if (wait_for_reports(dir.path, 2, 10s)) kill(getpid(), sig);
  });
  const LaunchResult result = run_workers(options);
  sender.join();
  CHECK(result.exit_code == 128 + sig);
  CHECK_FALSE(result.failed_rank.has_value());
  CHECK(result.message == "interrupted (" + name + "): stopped 2 workers");
  check_no_worker_left(dir.path, 2);
}

TEST_CASE("a worker that cannot be started raises LaunchError naming the path") {
  LaunchOptions options;
  options.world_size = 2;
  SECTION("missing executable") {
    options.argv = {"/nonexistent/ppctl-worker", "--flag"};
    CHECK_THROWS_MATCHES(run_workers(options), ppctl::LaunchError,
                         Catch::Matchers::MessageMatches(ContainsSubstring(
                             "cannot start worker for rank 0: /nonexistent/ppctl-worker: "
                             "No such file or directory")));
  }
  SECTION("no PATH search") {
    options.argv = {"true"};  // exists in PATH, not in the working directory
    CHECK_THROWS_AS(run_workers(options), ppctl::LaunchError);
  }
  SECTION("not executable") {
    const std::string not_executable = PPCTL_SOURCE_DIR "/CMakeLists.txt";
    options.argv = {not_executable};
    CHECK_THROWS_WITH(run_workers(options),
                      ContainsSubstring(not_executable + ": Permission denied"));
  }
  CHECK(waitpid(-1, nullptr, WNOHANG) == -1);
}

TEST_CASE("a stalled rank named by find_stall is blamed, and a stopped worker ends at once") {
  TempDir dir;
  LaunchOptions options = worker_job(dir.path, {"exit:1", "stop", "sleep"});
  options.grace = 10s;  // SIGCONT after SIGTERM: the stopped rank must not need the SIGKILL
  std::vector<int> seen_running;
  options.find_stall = [&](const std::vector<int>& running)
      -> std::optional<std::pair<int, std::string>> {
    seen_running = running;
    const pid_t pid = std::stoi(value_of(read_report(dir.path, 1), "@pid"));
    if (!wait_until_stopped(pid, 5s)) return std::nullopt;
    return std::pair{1, std::string("no progress report for 9.0 s")};
  };

  const auto start = std::chrono::steady_clock::now();
  const LaunchResult result = run_workers(options);
  CHECK(seconds_since(start) < 5.0);
  CHECK(seen_running == std::vector<int>{1, 2});
  CHECK(result.exit_code == 1);
  CHECK(result.failed_rank == 0);
  CHECK(result.stalled_rank == 1);
  CHECK(result.message ==
        "rank 1 stopped making progress: no progress report for 9.0 s; then rank 0 exited with code 1");
  check_no_worker_left(dir.path, 3);
}

TEST_CASE("find_stall finding nothing leaves the failed rank blamed") {
  TempDir dir;
  LaunchOptions options = worker_job(dir.path, {"sleep", "exit:4"});
  options.find_stall = [](const std::vector<int>&) -> std::optional<std::pair<int, std::string>> {
    return std::nullopt;
  };
  const LaunchResult result = run_workers(options);
  CHECK(result.exit_code == 4);
  CHECK_FALSE(result.stalled_rank.has_value());
  CHECK(result.message == "rank 1 exited with code 4");
  check_no_worker_left(dir.path, 2);
}

TEST_CASE("a signal caught by an enclosing StopSignalScope before run_workers stops the job") {
  struct sigaction int_before {}, int_after {};
  sigaction(SIGINT, nullptr, &int_before);
  TempDir dir;
  {
    const ppctl::launch::StopSignalScope early;
    kill(getpid(), SIGINT);  // e.g. a Ctrl-C while the launcher writes its run directory
    CHECK(ppctl::launch::StopSignalScope::caught() == SIGINT);
    const LaunchResult result = run_workers(worker_job(dir.path, {"sleep", "sleep"}));
    CHECK(result.exit_code == 128 + SIGINT);
    CHECK(result.interrupted);
    CHECK(ppctl::launch::StopSignalScope::caught() == SIGINT);  // the inner scope kept it
  }
  sigaction(SIGINT, nullptr, &int_after);
  CHECK(same_disposition(int_before, int_after));
}

TEST_CASE("with cause_of, the rank that failed on its own is blamed, with its cause and exit code") {
  TempDir dir;
  // Rank 0 ends first with a peer failure; rank 1, the cause, reports a moment later, still running.
  LaunchOptions options = worker_job(dir.path, {"exit:1", "sleep"});
  const auto start = std::chrono::steady_clock::now();
  options.cause_of = [start](int rank) -> std::optional<ppctl::launch::WorkerCause> {
    if (rank == 0) return ppctl::launch::WorkerCause{1, "receive from rank 1 failed: connection closed", true};
    if (seconds_since(start) > 0.5) return ppctl::launch::WorkerCause{2, "block0.pt is truncated", false};
    return std::nullopt;
  };
  const LaunchResult result = run_workers(options);
  CHECK(result.failed_rank == 1);
  CHECK(result.exit_code == 2);
  CHECK(result.message == "rank 1 failed: block0.pt is truncated");
  check_no_worker_left(dir.path, 2);
}

TEST_CASE("with cause_of, a rank that reported nothing (killed) is blamed before a peer failure") {
  TempDir dir;
  LaunchOptions options = worker_job(dir.path, {"exit:1", "raise:9"});
  options.cause_of = [](int rank) -> std::optional<ppctl::launch::WorkerCause> {
    if (rank == 0) return ppctl::launch::WorkerCause{1, "receive from rank 1 failed", true};
    return std::nullopt;
  };
  const LaunchResult result = run_workers(options);
  CHECK(result.failed_rank == 1);
  CHECK(result.exit_code == 128 + 9);
  CHECK(result.message == "rank 1 was killed by signal 9 (Killed)");
  check_no_worker_left(dir.path, 2);
}

TEST_CASE("a second signal once every running rank has reported its stop ends the job as stopped, not failed") {
  // The workers (sleeping, their stop signals held) stand for ranks that finished their stop and are exiting:
  // stopped_as says what each reported. Every world size, including one worker ("1 worker", not "1 workers").
  const int world_size = GENERATE(1, 3);
  const int reported = GENERATE(ppctl::launch::kExitStoppedResumable, 128 + SIGINT);
  const bool all_reported = GENERATE(true, false);
  INFO("world size " << world_size << ", reported " << reported << ", all reported " << all_reported);
  TempDir dir;
  LaunchOptions options = worker_job(dir.path, std::vector<std::string>(static_cast<size_t>(world_size), "sleep"));
  options.forward_stop_signals = true;
  options.stopped_as = [&](int rank) -> std::optional<int> {
    if (!all_reported && rank == world_size - 1) return std::nullopt;  // this one is still writing
    return reported;
  };
  std::thread sender([&] {
    if (!wait_for_reports(dir.path, world_size, 10s)) return;
    kill(getpid(), SIGINT);  // forwarded: ask them to stop
    std::this_thread::sleep_for(300ms);
    kill(getpid(), SIGINT);  // a second Ctrl-C while they exit
  });
  const LaunchResult result = run_workers(options);
  sender.join();
  CHECK(result.interrupted);
  CHECK_FALSE(result.failed_rank.has_value());
  const std::string who = world_size == 1 ? "the worker" : "all 3 workers";
  if (all_reported) {
    CHECK(result.exit_code == reported);
    CHECK(result.stop_signal == SIGINT);
    CHECK(result.message == "interrupted (SIGINT): " + who + " stopped, " +
                                (reported == ppctl::launch::kExitStoppedResumable
                                     ? "with a checkpoint (exit code 75: resumable with --resume auto)"
                                     : "without a checkpoint"));
  } else {
    CHECK(result.exit_code == 128 + SIGINT);
    CHECK(result.stop_signal == 0);
    CHECK(result.message == "interrupted (SIGINT): stopped " +
                                std::string(world_size == 1 ? "1 worker" : "3 workers"));
  }
  check_no_worker_left(dir.path, world_size);
}
