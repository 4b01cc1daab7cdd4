// Making, filling and closing a run directory.
#include "observe/run_dir.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "config/load.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "observe/trace_merge.hpp"
#include "runtime/trace.hpp"

namespace ppctl::observe {
namespace {

namespace fs = std::filesystem;

/// Creates `dir` (with parents) or accepts it when it exists and is empty.
void make_empty_directory(const fs::path& dir) {
  std::error_code error;
  if (fs::exists(dir, error)) {
    if (!fs::is_directory(dir, error)) {
      throw Error(fmt::format("--run-dir {}: exists and is not a folder (fix: name a new folder)",
                              dir.string()));
    }
    if (!fs::is_empty(dir, error)) {
      throw Error(fmt::format("--run-dir {}: the folder is not empty (fix: name a new or empty "
                              "folder, so no earlier run's files are mixed in)",
                              dir.string()));
    }
    return;
  }
  fs::create_directories(dir, error);
  if (error) {
    throw Error(fmt::format("--run-dir {}: cannot create the folder: {} (fix: name a folder you "
                            "can write)",
                            dir.string(), error.message()));
  }
}

/// Creates a new folder `spec.observe.runs_dir/name` (or `name-2`, `name-3`, ... when taken). Errors start
/// with where the spec writes observe.runs_dir (`job.yaml:7: observe.runs_dir: value ...`).
fs::path make_new_directory(const config::JobSpec& spec, const std::string& spec_text, const std::string& name) {
  const fs::path root = spec.observe.runs_dir;
  const std::string location = config::field_location(spec_text, spec.source, "observe.runs_dir");
  const auto fail = [&](const std::string& why, const std::string& fix) {
    return Error(fmt::format("{}: observe.runs_dir: value {}{}: {} (fix: {})", location, root.string(),
                             location == spec.source ? " (default)" : "", why, fix));
  };
  const std::string writable = "set observe.runs_dir to a folder you can write, or use --run-dir";
  std::error_code error;
  fs::create_directories(root, error);
  if (error) throw fail(fmt::format("cannot create the folder: {}", error.message()), writable);
  for (int n = 1; n < 1000; ++n) {
    const fs::path dir = root / (n == 1 ? name : fmt::format("{}-{}", name, n));
    if (fs::create_directory(dir, error)) return dir;
    if (error) throw fail(fmt::format("cannot create {}: {}", dir.string(), error.message()), writable);
  }
  throw fail(fmt::format("999 runs named {} already", name), "clean up the folder");
}

}  // namespace

std::string run_directory_name(const std::string& spec_path, std::time_t when) {
  std::tm utc{};
  gmtime_r(&when, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%SZ", &utc);
  return fmt::format("{}-{}", fs::path(spec_path).stem().string(), stamp);
}

RunDirectory create_run_directory(const config::JobSpec& spec, const std::string& spec_text,
                                  const std::string& plan_text, const std::string& explicit_dir,
                                  const std::string& log_name) {
  RunDirectory run;
  run.origin_us = runtime::wall_clock_us();
  fs::path dir;
  if (!explicit_dir.empty()) {
    dir = explicit_dir;
    make_empty_directory(dir);
  } else {
    dir = make_new_directory(spec, spec_text,
                             run_directory_name(spec.source, static_cast<std::time_t>(run.origin_us / 1'000'000)));
  }
  run.path = fs::absolute(dir).lexically_normal().string();
  core::write_file_atomically(fs::path(run.path) / "config.yaml", spec_text);
  core::write_file_atomically(fs::path(run.path) / "plan.txt", plan_text);
  core::add_log_file((fs::path(run.path) / log_name).string());
  return run;
}

std::vector<std::pair<std::string, std::string>> run_directory_env(const RunDirectory& run) {
  return {{kRunDirVariable, run.path}};
}

std::optional<std::string> run_directory_from_env() {
  const char* dir = std::getenv(kRunDirVariable);
  if (dir == nullptr || *dir == '\0') return std::nullopt;
  return std::string(dir);
}

void finish_run_directory(const RunDirectory& run, int world_size, bool traced, int64_t data_parallel,
                          int64_t tensor_parallel) {
  try {
    const auto merge = traced ? observe::merge_trace_parts(run.path, world_size, run.origin_us, data_parallel,
                                                           tensor_parallel)
                              : observe::TraceMerge{};
    if (!traced) {
      spdlog::info("no trace (observe.trace_steps is 0)");
    } else if (merge.path.empty()) {
      spdlog::warn("no rank left a trace part in {}: no trace.json (observe.trace_steps counts from step 1, so a run "
                   "resumed past it traces nothing; otherwise the ranks failed before writing it)",
                   run.path);
    } else if (merge.ranks_missing.empty()) {
      spdlog::info("trace of {} written to {} (open it in https://ui.perfetto.dev)",
                   data_parallel * tensor_parallel > 1
                       ? fmt::format("{}'s {} pipeline ranks (the {} run the same schedule)",
                                     tensor_parallel > 1 ? "tp rank 0 of replica 0" : "replica 0",
                                     merge.ranks_merged.size(),
                                     tensor_parallel > 1 ? fmt::format("{} tp ranks of each of the {} replicas",
                                                                       tensor_parallel, data_parallel)
                                                         : fmt::format("{} replicas", data_parallel))
                       : fmt::format("{} rank{}", merge.ranks_merged.size(), merge.ranks_merged.size() == 1 ? "" : "s"),
                   merge.path);
    } else {
      spdlog::warn("trace written to {} without rank(s) {}: they left no trace part (failed or "
                   "killed before writing it)",
                   merge.path, fmt::join(merge.ranks_missing, ", "));
    }
  } catch (const std::exception& e) {
    spdlog::error("merging the trace parts in {} failed: {}", run.path, e.what());
  }
  spdlog::info("run directory: {}", run.path);
}

}  // namespace ppctl::observe
