// The run directory shared by the ranks of a torchrun or Slurm job: made by rank 0, found by the rest.
#include "job/shared_run_dir.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/packed_corpus.hpp"
#include "runtime/trace.hpp"
#include "schedule/report.hpp"
#include "schedule/simulate.hpp"

namespace ppctl::job {
using observe::create_run_directory;
using observe::RunDirectory;
using observe::finish_run_directory;
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "this node";
  return name;
}

/// Polls (every 100 ms) until `ready()` or `limit` passes; returns ready()'s last value.
template <typename Ready>
bool poll_until(std::chrono::milliseconds limit, Ready ready) {
  const auto deadline = Clock::now() + limit;
  while (!ready()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

/// The key a rank sets once it has read kRunDirKey.
std::string read_key(int rank) { return fmt::format("{}/read/{}", kRunDirKey, rank); }

/// Rank 0: makes the folder, publishes its path (or why it could not), prints where it is. When it
/// could not, it waits (within `timeout`) until every other rank has read why before it ends the store.
SharedRunDirectory make_and_publish(comm::JobStore* store, const PreparedJob& job, const std::string& spec_path,
                                    const std::string& explicit_dir, std::chrono::milliseconds timeout) {
  const std::string& spec_text = job.spec_text;
  const std::string plan_text = run_plan_text(job);
  SharedRunDirectory shared;
  try {
    shared.made = create_run_directory(job.spec, spec_text, plan_text, explicit_dir, "rank0.log");
  } catch (const Error& e) {
    if (store != nullptr) {
      store->set(kRunDirKey, nlohmann::json{{"error", e.what()}}.dump());
      const auto deadline = Clock::now() + timeout;
      for (int r = 1; r < store->info().world_size; ++r) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0 || !store->wait_get(read_key(r), left)) break;
      }
    }
    throw RunDirectoryError(e.what());
  }
  shared.path = shared.made->path;
  if (store != nullptr) store->set(kRunDirKey, nlohmann::json{{"path", shared.made->path}}.dump());
  std::cerr << run_start_text(spec_path, spec_text, plan_text);
  spdlog::info("run directory: {}", shared.made->path);
  return shared;
}

/// Another rank: waits for rank 0's path and checks that this node sees the folder.
SharedRunDirectory find_published(comm::JobStore& store, int rank, std::chrono::milliseconds timeout) {
  const auto text = store.wait_get(kRunDirKey, timeout);
  if (!text) {
    throw CommTimeout(fmt::format(
        "rank {}: rank 0 published no run directory ({}) within runtime.comm_timeout_s = {:g} s (rank 0 makes it "
        "first thing after joining: see its output) (fix: check that rank 0 runs and can write its working "
        "directory; raise runtime.comm_timeout_s if it is slow to start)",
        rank, kRunDirKey, std::chrono::duration<double>(timeout).count()));
  }
  store.set(read_key(rank), "1");
  const auto json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (json.is_object() && json.contains("error") && json["error"].is_string()) {
    throw RunDirectoryError(fmt::format("rank 0 could not make the run directory: {}", json["error"].get<std::string>()));
  }
  if (!json.is_object() || !json.contains("path") || !json["path"].is_string()) {
    throw CommError(fmt::format("rank {}: the rendezvous store holds no run directory path under {} but '{}'",
                                rank, kRunDirKey, *text));
  }
  SharedRunDirectory shared;
  const std::string path = json["path"].get<std::string>();
  const fs::path marker = fs::path(path) / "config.yaml";
  const auto limit = std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(10));
  if (!poll_until(limit, [&] {
        std::error_code ignored;
        return fs::is_regular_file(marker, ignored);
      })) {
    spdlog::warn("rank {} on {} cannot see the run directory {} that rank 0 made (no {} after {:g} s): this "
                 "rank's log{} are not kept there (fix: start the job from a folder on a file system every node "
                 "shares, or set observe.runs_dir or --run-dir to an absolute path on one)",
                 rank, host_name(), path, marker.filename().string(), std::chrono::duration<double>(limit).count(),
                 ", metrics and trace part");
    return shared;
  }
  core::add_log_file((fs::path(path) / fmt::format("rank{}.log", rank)).string());
  shared.path = path;
  spdlog::debug("run directory: {}", path);
  return shared;
}

}  // namespace

std::string run_plan_text(const PreparedJob& job) {
  const schedule::CostModel costs;
  return data::with_packing(job.spec, schedule::format_plan(job.spec, job.layout, job.program,
                                                            schedule::simulate(job.program, costs), costs, false));
}

std::string run_start_text(const std::string& spec_path, const std::string& spec_text,
                           const std::string& plan_text) {
  std::string shown = spec_text;
  if (spec_text.size() > kEchoedSpecBytes) {
    const auto end = spec_text.rfind('\n', kEchoedSpecBytes - 1);
    const std::size_t kept = end == std::string::npos ? kEchoedSpecBytes : end + 1;
    shown = fmt::format("{}{}[... {} more bytes of the spec: config.yaml in the run directory holds all of it]\n",
                        spec_text.substr(0, kept), spec_text[kept - 1] == '\n' ? "" : "\n", spec_text.size() - kept);
  }
  return fmt::format("config ({}, as validated):\n{}{}\n{}\n", spec_path, shown,
                     shown.empty() || shown.back() == '\n' ? "" : "\n", plan_text);
}

SharedRunDirectory share_run_directory(comm::JobStore* store, int rank, const PreparedJob& job,
                                       const std::string& spec_path, const std::string& explicit_dir,
                                       std::chrono::milliseconds timeout) {
  if (rank == 0) return make_and_publish(store, job, spec_path, explicit_dir, timeout);
  if (store == nullptr) throw InternalError("a rank other than 0 without the job's store");
  return find_published(*store, rank, timeout);
}

void finish_shared_run_directory(const RunDirectory& run, int pipeline_ranks, bool traced,
                                 std::chrono::milliseconds grace, int64_t data_parallel, int64_t tensor_parallel) {
  if (traced) {
    poll_until(grace, [&] {
      for (int r = 0; r < pipeline_ranks; ++r) {
        std::error_code ignored;
        if (!fs::exists(fs::path(run.path) / runtime::trace_part_name(r), ignored)) return false;
      }
      return true;
    });
  }
  finish_run_directory(run, pipeline_ranks, traced, data_parallel, tensor_parallel);
}

}  // namespace ppctl::job
