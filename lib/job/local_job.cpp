// Local job: rendezvous store plus supervised worker processes, restarted from the latest
// checkpoint after a failure (train.max_restarts), and the stall report from the workers' progress.
#include "job/local_job.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "checkpoint/checkpoint.hpp"
#include "comm/failure_report.hpp"
#include "comm/progress_board.hpp"
#include "comm/rendezvous.hpp"
#include "comm/socket_interface.hpp"
#include "core/error.hpp"
#include "core/rank_list.hpp"
#include "launch/cpu_placement.hpp"
#include "launch/stop_signals.hpp"
#include "observe/run_dir.hpp"

namespace ppctl::job {
using observe::kRunDirVariable;
using checkpoint::resolve_checkpoint;
namespace {

namespace fs = std::filesystem;

/// Exit code of a worker that found bad input: restarting cannot help.
constexpr int kBadInputExit = 2;

/// The launcher's stall finder over `store`: the running rank whose progress record went stale.
std::function<std::optional<std::pair<int, std::string>>(const std::vector<int>&)> stall_finder(
    const comm::StoreServer& store, int world_size) {
  return [&store, world_size](const std::vector<int>& running)
             -> std::optional<std::pair<int, std::string>> {
    std::vector<std::optional<comm::ProgressRecord>> records(static_cast<size_t>(world_size));
    try {
      for (const int rank : running)
        if (const auto text = store.try_get(comm::progress_key(rank)))
          records[static_cast<size_t>(rank)] = comm::decode_progress(*text);
    } catch (const Error& e) {
      spdlog::warn("cannot read the workers' progress: {}", e.what());
      return std::nullopt;
    }
    const auto stall =
        comm::find_stall(records, running, comm::wall_clock_s(), comm::kStaleAfterSeconds);
    if (!stall) return std::nullopt;
    return std::pair{stall->rank, comm::describe_stall(*stall)};
  };
}

/// One attempt: a fresh store, the workers, their end.
launch::LaunchResult run_attempt(const config::JobSpec& spec, launch::LaunchOptions options) {
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(spec.runtime.comm_timeout_s * 1000.0));
  comm::StoreServer store(spec.runtime.master_addr, static_cast<int>(spec.runtime.master_port),
                          options.world_size, timeout);
  options.master_port = store.port();
  options.extra_env.emplace_back(comm::kJobIdVariable, store.job_id());  // new for every attempt
  options.find_stall = stall_finder(store, options.world_size);
  options.cause_of = [&store](int rank) -> std::optional<launch::WorkerCause> {
    try {
      if (const auto text = store.try_get(comm::failure_key(rank)))
        if (const auto report = comm::decode_failure(*text))
          return launch::WorkerCause{report->exit_code, report->cause, report->peer_failure};
    } catch (const Error& e) {
      spdlog::warn("cannot read rank {}'s failure report: {}", rank, e.what());
    }
    return std::nullopt;
  };
  options.stopped_as = [&store](int rank) -> std::optional<int> {
    try {
      if (const auto text = store.try_get(comm::stop_key(rank))) return comm::decode_stop(*text);
    } catch (const Error& e) {
      spdlog::warn("cannot read rank {}'s stop report: {}", rank, e.what());
    }
    return std::nullopt;
  };
  spdlog::info("rendezvous store on {}:{}; starting {} worker{}", options.master_addr,
               options.master_port, options.world_size, options.world_size == 1 ? "" : "s");
  return launch::run_workers(options);
}

/// `args` with its `--resume X` replaced by (or, without one, extended with) `--resume checkpoint`.
std::vector<std::string> with_resume(std::vector<std::string> args, const std::string& checkpoint) {
  const auto it = std::find(args.begin(), args.end(), "--resume");
  if (it != args.end() && it + 1 != args.end()) {
    *(it + 1) = checkpoint;
  } else {
    args.push_back("--resume");
    args.push_back(checkpoint);
  }
  return args;
}

/// A checkpoint as found in checkpoint.dir: its folder and when its meta.json was written (empty path
/// when there is none).
struct CheckpointMark {
  std::string path;
  fs::file_time_type written{};
  bool operator==(const CheckpointMark& other) const {
    return path == other.path && written == other.written;
  }
};

/// The latest complete checkpoint in checkpoint.dir (an empty mark when there is none yet); `warn`
/// logs why one that `latest` names is unusable.
CheckpointMark latest_checkpoint(const config::JobSpec& spec, bool warn) {
  if (spec.checkpoint.dir.empty()) return {};
  std::error_code ignored;
  if (!fs::exists(fs::path(spec.checkpoint.dir) / "latest", ignored)) return {};
  try {
    CheckpointMark mark{fs::absolute(resolve_checkpoint(spec.checkpoint.dir)).string(), {}};
    mark.written = fs::last_write_time(fs::path(mark.path) / "meta.json", ignored);
    return mark;
  } catch (const CheckpointError& e) {
    if (warn) spdlog::warn("no usable checkpoint to restart from: {}", e.what());
    return {};
  }
}

/// Keeps the failed attempt's metrics.jsonl (workers start a new one) as metrics.attempt<N>.jsonl.
void keep_attempt_metrics(const std::vector<std::pair<std::string, std::string>>& env, int attempt) {
  for (const auto& [name, value] : env) {
    if (name != kRunDirVariable) continue;
    const fs::path metrics = fs::path(value) / "metrics.jsonl";
    std::error_code error;
    if (!fs::exists(metrics, error)) return;
    fs::rename(metrics, fs::path(value) / fmt::format("metrics.attempt{}.jsonl", attempt), error);
    if (error) spdlog::warn("cannot keep {}: {}", metrics.string(), error.message());
  }
}

/// Waits `seconds`, or less when SIGINT/SIGTERM arrives; true when it arrived.
bool interrupted_during(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (launch::StopSignalScope::caught() != 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return launch::StopSignalScope::caught() != 0;
}

}  // namespace

launch::LaunchResult run_local_job(const config::JobSpec& spec, int world_size,
                                   const std::string& executable, const std::string& spec_path,
                                   const std::vector<std::string>& extra_args,
                                   const std::vector<std::pair<std::string, std::string>>& extra_env) {
  const launch::StopSignalScope stop_signals;  // a Ctrl-C between attempts ends the job too
  launch::LaunchOptions options;
  options.world_size = world_size;
  options.extra_env = extra_env;
  options.master_addr = spec.runtime.master_addr;
  options.forward_stop_signals = true;  // the workers stop at a step boundary themselves (train.on_signal)
  // GLOO_SOCKET_IFNAME: checked once here, before any worker starts (bad input, exit 2), and a job on one
  // machine that names an interface other than loopback is told that its Gloo sockets leave loopback.
  const bool gloo = spec.runtime.backend == config::Backend::Gloo ||
                    (spec.runtime.backend == config::Backend::Auto && spec.runtime.device == config::Device::Cpu);
  if (gloo) {
    for (const auto& name : comm::gloo_socket_interfaces(comm::environment_map())) {
      if (name == "lo") continue;
      spdlog::warn("{}={}: the workers' Gloo sockets listen on {}'s address, reachable from its network, not on "
                   "runtime.master_addr {} only (fix: unset {} for a job on one machine)",
                   comm::kGlooInterfaceVariable, name, name, spec.runtime.master_addr, comm::kGlooInterfaceVariable);
    }
  }
  const auto placement = launch::place_workers(launch::usable_cpus(), world_size,
                                               static_cast<int>(spec.runtime.threads_per_worker),
                                               spec.runtime.cpu_binding == config::CpuBinding::Cores);
  if (placement.oversubscribed) spdlog::warn("{}", *placement.oversubscribed);
  if (!placement.per_worker.empty()) {
    std::vector<std::string> where;
    for (size_t r = 0; r < placement.per_worker.size(); ++r) {
      const auto& cpus = placement.per_worker[r];
      where.push_back(fmt::format("rank {}: {}", r,
                                  core::format_rank_list(std::vector<int64_t>(cpus.begin(), cpus.end()))));
    }
    spdlog::info("workers bound to CPUs (runtime.cpu_binding cores): {}", fmt::join(where, "; "));
  }
  options.cpus = placement.per_worker;
  const auto argv_with = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {executable, "worker", fs::absolute(spec_path).string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  };
  const int64_t max_restarts = spec.train.max_restarts;
  // What checkpoint.dir held before this job: a restart never picks up another run's checkpoint.
  const auto before = latest_checkpoint(spec, false);
  std::vector<std::string> args = extra_args;
  for (int64_t restarts = 0;; ++restarts) {
    options.argv = argv_with(args);
    auto result = run_attempt(spec, options);
    if (result.exit_code == 0 || result.interrupted || max_restarts == 0) return result;
    if (result.exit_code == kBadInputExit) {
      spdlog::error("{}: bad input (exit code {}), not restarted", result.message, kBadInputExit);
      return result;
    }
    if (restarts == max_restarts) {
      result.message = fmt::format("gave up after {} restart{} (train.max_restarts); last cause: {}",
                                   restarts, restarts == 1 ? "" : "s", result.message);
      spdlog::error("{}", result.message);
      return result;
    }
    auto latest = latest_checkpoint(spec, true);
    if (latest == before) latest = {};  // not written by this job
    const auto& checkpoint = latest.path;
    const bool resumed = std::find(args.begin(), args.end(), "--resume") != args.end();
    spdlog::warn("restart {} of {} in {:g} s (train.max_restarts), cause: {}; from {}",
                 restarts + 1, max_restarts, spec.train.restart_backoff_s, result.message,
                 !checkpoint.empty() ? "checkpoint " + checkpoint
                 : resumed ? std::string("where it started: no checkpoint written by this job yet")
                           : std::string("the start: no checkpoint written by this job yet"));
    if (!checkpoint.empty()) args = with_resume(args, checkpoint);
    keep_attempt_metrics(extra_env, static_cast<int>(restarts + 1));
    if (interrupted_during(spec.train.restart_backoff_s)) {
      const int sig = launch::StopSignalScope::caught();
      result.exit_code = 128 + sig;
      result.interrupted = true;
      result.message = fmt::format("interrupted ({}) before restart {}", launch::stop_signal_name(sig),
                                   restarts + 1);
      spdlog::warn("{}", result.message);
      return result;
    }
  }
}

std::optional<std::string> external_restart_warning(const config::JobSpec& spec, const std::string& launcher) {
  if (spec.train.max_restarts <= 0) return std::nullopt;
  return fmt::format(
      "train.max_restarts {} has no effect under {}: only `ppctl train` without a launcher restarts its "
      "workers (fix: {})",
      spec.train.max_restarts, launcher,
      launcher == "slurm" ? "PPCTL_MAX_RESTARTS with scripts/slurm/cpu.sbatch or gpu.sbatch, and sbatch --requeue"
                          : "torchrun --max-restarts; it reruns the same command, so an attempt starts from step 0 "
                            "unless the command has --resume, which the first attempt also needs a checkpoint for");
}

}  // namespace ppctl::job
