// Making, filling and closing a run directory.
#include "train/run_dir.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "runtime/trace.hpp"

namespace ppctl::train {
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

/// Creates a new folder `root/name` (or `name-2`, `name-3`, ... when taken).
fs::path make_new_directory(const fs::path& root, const std::string& name) {
  std::error_code error;
  fs::create_directories(root, error);
  if (error) {
    throw Error(fmt::format("observe.runs_dir: value {}: cannot create the folder: {} (fix: set "
                            "observe.runs_dir to a folder you can write, or use --run-dir)",
                            root.string(), error.message()));
  }
  for (int n = 1; n < 1000; ++n) {
    const fs::path dir = root / (n == 1 ? name : fmt::format("{}-{}", name, n));
    if (fs::create_directory(dir, error)) return dir;
    if (error) {
      throw Error(fmt::format("observe.runs_dir: value {}: cannot create {}: {} (fix: set "
                              "observe.runs_dir to a folder you can write, or use --run-dir)",
                              root.string(), dir.string(), error.message()));
    }
  }
  throw Error(fmt::format("observe.runs_dir: value {}: 999 runs named {} already (fix: clean up "
                          "the folder)",
                          root.string(), name));
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
                                  const std::string& plan_text, const std::string& explicit_dir) {
  RunDirectory run;
  run.origin_us = runtime::wall_clock_us();
  fs::path dir;
  if (!explicit_dir.empty()) {
    dir = explicit_dir;
    make_empty_directory(dir);
  } else {
    dir = make_new_directory(spec.observe.runs_dir,
                             run_directory_name(spec.source, static_cast<std::time_t>(
                                                                 run.origin_us / 1'000'000)));
  }
  run.path = fs::absolute(dir).lexically_normal().string();
  core::write_file_atomically(fs::path(run.path) / "config.yaml", spec_text);
  core::write_file_atomically(fs::path(run.path) / "plan.txt", plan_text);
  core::add_log_file((fs::path(run.path) / "launcher.log").string());
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

void finish_run_directory(const RunDirectory& run, int world_size, bool traced) {
  try {
    const auto merge = traced ? runtime::merge_trace_parts(run.path, world_size, run.origin_us)
                              : runtime::TraceMerge{};
    if (!traced) {
      spdlog::info("no trace (observe.trace_steps is 0)");
    } else if (merge.path.empty()) {
      spdlog::warn("no rank left a trace part in {}: no trace.json", run.path);
    } else if (merge.ranks_missing.empty()) {
      spdlog::info("trace of {} ranks written to {} (open it in https://ui.perfetto.dev)",
                   merge.ranks_merged.size(), merge.path);
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

}  // namespace ppctl::train
