// ppctl command line: `plan`, `train` and the internal `worker`. Parses arguments, calls lib/,
// maps exceptions to exit codes (0 ok, 1 runtime failure, 2 bad input, worker's code otherwise).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "comm/rendezvous.hpp"
#include "config/load.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "launch/launcher.hpp"
#include "plan/layout.hpp"
#include "schedule/generate.hpp"
#include "schedule/report.hpp"
#include "schedule/validate.hpp"
#include "train/worker.hpp"

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

std::string self_executable() {
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) throw ppctl::LaunchError("cannot find the ppctl executable (/proc/self/exe)");
  return std::string(buffer, static_cast<size_t>(n));
}

struct Planned {
  ppctl::config::JobSpec spec;
  ppctl::plan::Layout layout;
  ppctl::schedule::Program program;
};

/// Everything `plan` shows and `train` runs, validated before any process starts.
Planned make_plan(const std::string& spec_path) {
  Planned planned{ppctl::config::load_job_spec(spec_path), {}, {}};
  planned.layout = ppctl::plan::make_layout(planned.spec);
  planned.program = ppctl::schedule::generate(planned.spec.pipeline.schedule,
                                              planned.spec.pipeline.stages,
                                              planned.spec.pipeline.microbatches);
  ppctl::schedule::validate(planned.program);
  return planned;
}

int cmd_plan(const std::string& spec_path, bool with_communication) {
  const auto planned = make_plan(spec_path);
  std::cout << ppctl::schedule::format_plan(planned.spec, planned.layout, planned.program,
                                            with_communication);
  return 0;
}

int cmd_train(const std::string& spec_path, std::optional<int64_t> steps) {
  const auto planned = make_plan(spec_path);
  const auto& spec = planned.spec;
  std::cerr << ppctl::schedule::format_plan(spec, planned.layout, planned.program, false) << '\n';
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(spec.runtime.comm_timeout_s * 1000.0));
  const int world_size = static_cast<int>(planned.layout.world_size);
  ppctl::comm::StoreServer store(spec.runtime.master_addr, static_cast<int>(spec.runtime.master_port),
                                 world_size, timeout);

  ppctl::launch::LaunchOptions options;
  options.world_size = world_size;
  options.argv = {self_executable(), "worker", std::filesystem::absolute(spec_path).string()};
  if (steps) {
    options.argv.push_back("--steps");
    options.argv.push_back(std::to_string(*steps));
  }
  options.master_addr = spec.runtime.master_addr;
  options.master_port = store.port();
  spdlog::info("rendezvous store on {}:{}; starting {} workers", options.master_addr,
               options.master_port, world_size);
  const auto result = ppctl::launch::run_workers(options);
  if (result.exit_code == 0) {
    spdlog::info("training finished: {}", result.message);
  } else {
    spdlog::error("training failed: {}", result.message);
  }
  return result.exit_code;
}

/// A worker logs every failure itself (rank-prefixed); the launcher then names the rank and stops
/// the job.
int cmd_worker(const ppctl::train::WorkerOptions& options) {
  const char* rank = std::getenv("RANK");
  ppctl::core::setup_logging(rank ? std::optional<int>(std::atoi(rank)) : std::nullopt);
  try {
    return ppctl::train::run_worker(options);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return kExitFailure;
  }
}

}  // namespace

int main(int argc, char** argv) {
  ppctl::core::setup_logging(std::nullopt);
  CLI::App app{"ppctl: pipeline-parallel training launcher"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ppctl 0.1.0");

  std::string spec_path;
  bool with_communication = false;
  auto* plan = app.add_subcommand("plan", "Print the stage layout, bubble and schedule; start nothing");
  plan->add_option("spec", spec_path, "Job spec (YAML)")->required();
  plan->add_flag("--comm", with_communication, "Show communication actions too");

  std::optional<int64_t> steps;
  auto* train = app.add_subcommand("train", "Train: spawn one worker per stage and supervise them");
  train->add_option("spec", spec_path, "Job spec (YAML)")->required();
  train->add_option("--steps", steps, "Override train.steps")->check(CLI::Range(int64_t{1}, int64_t{1000000000}));

  ppctl::train::WorkerOptions worker_options;
  auto* worker = app.add_subcommand("worker", "Internal: run one rank (started by `ppctl train`)");
  worker->group("");  // hidden from --help
  worker->add_option("spec", worker_options.spec_path, "Job spec (YAML)")->required();
  worker->add_option("--steps", worker_options.steps, "Override train.steps");
  worker->add_option("--dump-gradients", worker_options.dump_gradients_dir,
                     "Testing: write step 1's gradients to DIR/rank<R>.pt and stop");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }

  try {
    if (*plan) return cmd_plan(spec_path, with_communication);
    if (*train) return cmd_train(spec_path, steps);
    if (*worker) return cmd_worker(worker_options);
  } catch (const ppctl::ConfigError& e) {
    for (const auto& line : e.problems()) std::cerr << "error: " << line << '\n';
    std::cerr << fmt::format("{} problem(s) in the job spec; nothing was started\n", e.problems().size());
    return kExitBadInput;
  } catch (const ppctl::PlanError& e) {
    std::cerr << "error: " << e.what() << "\nnothing was started\n";
    return kExitBadInput;
  } catch (const ppctl::ScheduleError& e) {
    std::cerr << "error: " << e.what() << "\nnothing was started\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return kExitFailure;
  }
  return kExitFailure;
}
