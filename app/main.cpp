// ppctl command line: `plan`, `train`, `verify` and the internal `worker`. Parses arguments, calls
// lib/, maps exceptions to exit codes (0 ok, 1 runtime failure, 2 bad input, 3 verify mismatch,
// a failed worker's code otherwise).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "comm/error_text.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "schedule/report.hpp"
#include "schedule/simulate.hpp"
#include "train/local_job.hpp"
#include "train/prepared_job.hpp"
#include "train/verify.hpp"
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

struct PlanOptions {
  bool with_communication = false;
  bool timeline = false;
  std::string trace_path;
  std::vector<double> costs;  // F, B, I, W in ms; once, or once per stage
  double p2p_latency = 0.0;
};

ppctl::schedule::CostModel cost_model(const PlanOptions& options) {
  ppctl::schedule::CostModel costs;
  if (options.costs.size() % 4 != 0) {
    throw ppctl::PlanError(fmt::format("--costs: {} values; give F,B,I,W for every stage (4 values) or for "
                                       "each stage in order (4 per stage)",
                                       options.costs.size()));
  }
  if (!options.costs.empty()) costs.stages.clear();
  for (size_t i = 0; i < options.costs.size(); i += 4) {
    costs.stages.push_back({options.costs[i], options.costs[i + 1], options.costs[i + 2], options.costs[i + 3]});
  }
  costs.p2p_latency = options.p2p_latency;
  return costs;
}

int cmd_plan(const std::string& spec_path, const PlanOptions& options) {
  const auto planned = ppctl::train::prepare_job(spec_path);
  const auto costs = cost_model(options);
  const auto simulation = ppctl::schedule::simulate(planned.program, costs);
  std::cout << ppctl::schedule::format_plan(planned.spec, planned.layout, planned.program, simulation,
                                            costs, options.with_communication);
  if (options.timeline) std::cout << '\n' << ppctl::schedule::format_timeline(simulation);
  if (!options.trace_path.empty()) {
    const std::string tmp = options.trace_path + ".tmp";
    std::ofstream out(tmp);
    out << ppctl::schedule::to_chrome_trace(simulation);
    out.close();
    std::error_code error;
    if (out) std::filesystem::rename(tmp, options.trace_path, error);
    if (!out || error) {
      std::filesystem::remove(tmp, error);
      throw ppctl::Error(fmt::format("cannot write the trace file {}: {}", options.trace_path,
                                     std::strerror(errno)));
    }
    std::cout << "trace written to " << options.trace_path << " (open it in https://ui.perfetto.dev)\n";
  }
  return 0;
}

int cmd_train(const std::string& spec_path, std::optional<int64_t> steps) {
  const auto planned = ppctl::train::prepare_job(spec_path);
  ppctl::train::check_device_available(planned.spec);
  const ppctl::schedule::CostModel costs;
  std::cerr << ppctl::schedule::format_plan(planned.spec, planned.layout, planned.program,
                                            ppctl::schedule::simulate(planned.program, costs), costs,
                                            false)
            << '\n';
  std::vector<std::string> extra;
  if (steps) extra = {"--steps", std::to_string(*steps)};
  const auto result =
      ppctl::train::run_local_job(planned.spec, static_cast<int>(planned.layout.world_size),
                                  self_executable(), spec_path, extra, planned.worker_env);
  if (result.exit_code == 0) {
    spdlog::info("training finished: {}", result.message);
  } else {
    spdlog::error("training failed: {}", result.message);
  }
  return result.exit_code;
}

int cmd_verify(const std::string& spec_path, double tolerance) {
  const auto planned = ppctl::train::prepare_job(spec_path);
  ppctl::train::check_device_available(planned.spec);
  const auto report = ppctl::train::verify_job(planned.spec, static_cast<int>(planned.layout.world_size),
                                               self_executable(), spec_path, tolerance,
                                               planned.worker_env);
  std::cout << report.text;
  return report.exit_code;
}

/// A worker logs every failure itself (rank-prefixed); the launcher then names the rank and stops
/// the job.
int cmd_worker(const ppctl::train::WorkerOptions& options) {
  const char* rank = std::getenv("RANK");
  ppctl::core::setup_logging(rank ? std::optional<int>(std::atoi(rank)) : std::nullopt);
  try {
    return ppctl::train::run_worker(options);
  } catch (const std::exception& e) {
    spdlog::error("{}", ppctl::comm::error_text(e));
    return kExitFailure;
  }
}

/// CLI11 check: a number of at least `min` (above it when `strict`), with a readable message.
CLI::Validator number_check(double min, bool strict) {
  return CLI::Validator(
      [min, strict](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(value)) return "'" + text + "' is not a number";
        if (strict ? value <= min : value < min) {
          return fmt::format("{} must be {} {:g}", text, strict ? "greater than" : "at least", min);
        }
        return "";
      },
      strict ? "NUMBER > " + fmt::format("{:g}", min) : "NUMBER >= " + fmt::format("{:g}", min));
}

/// CLI11 check: a path where a file can be written (not a folder; its folder exists).
const CLI::Validator kWritableFile(
    [](std::string& path) -> std::string {
      std::error_code ignored;
      if (path.empty()) return "the file name is empty";
      if (std::filesystem::is_directory(path, ignored) || path.back() == '/') {
        return path + " is a folder (fix: name a file, e.g. " + path + "/plan.json)";
      }
      const auto folder = std::filesystem::path(path).parent_path();
      if (!folder.empty() && !std::filesystem::is_directory(folder, ignored)) {
        return "folder " + folder.string() + " does not exist";
      }
      return "";
    },
    "FILE");

}  // namespace

int main(int argc, char** argv) {
  ppctl::core::setup_logging(std::nullopt);
  CLI::App app{"ppctl: pipeline-parallel training launcher"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ppctl 0.1.0");

  std::string spec_path;
  PlanOptions plan_options;
  auto* plan = app.add_subcommand("plan", "Print the stage layout, simulated step and schedule; start nothing");
  plan->add_option("spec", spec_path, "Job spec (YAML)")->required();
  plan->add_flag("--comm", plan_options.with_communication, "Show communication actions too");
  plan->add_flag("--timeline", plan_options.timeline, "Print the simulated timeline per rank");
  plan->add_option("--trace", plan_options.trace_path,
                   "Write the simulated timeline as Chrome-trace/Perfetto JSON to this file")
      ->check(kWritableFile);
  plan->add_option("--costs", plan_options.costs,
                   "Costs of F,B,I,W in ms: 4 values for every stage, or 4 per stage in stage order "
                   "(default 1,2,1,1)")
      ->delimiter(',')
      ->expected(4, CLI::detail::expected_max_vector_size)
      ->check(number_check(0.0, true));
  plan->add_option("--p2p-latency", plan_options.p2p_latency, "Transfer latency between ranks, ms")
      ->check(number_check(0.0, false));

  std::optional<int64_t> steps;
  auto* train = app.add_subcommand("train", "Train: spawn one worker per rank and supervise them");
  train->add_option("spec", spec_path, "Job spec (YAML)")->required();
  train->add_option("--steps", steps, "Override train.steps")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000000}));

  double tolerance = 1e-5;
  auto* verify = app.add_subcommand(
      "verify", "Run one pipelined step and one unpipelined; compare every gradient and the loss");
  verify->add_option("spec", spec_path, "Job spec (YAML)")->required();
  verify->add_option("--tolerance", tolerance, "Largest accepted relative difference (default 1e-5)")
      ->check(number_check(0.0, true));

  ppctl::train::WorkerOptions worker_options;
  auto* worker = app.add_subcommand("worker", "Internal: run one rank (started by `ppctl train`)");
  worker->group("");  // hidden from --help
  worker->add_option("spec", worker_options.spec_path, "Job spec (YAML)")->required();
  worker->add_option("--steps", worker_options.steps, "Override train.steps");
  worker->add_option("--dump-gradients", worker_options.dump_gradients_dir,
                     "Testing: write step 1's gradients (after clipping), loss and global "
                     "gradient norm to DIR/rank<R>.pt and stop");
  worker->add_option_function<std::string>(
      "--inject-nan",
      [&worker_options](const std::string& text) {
        try {
          worker_options.inject_nan = ppctl::train::parse_nan_injection(text);
        } catch (const ppctl::Error& e) {
          throw CLI::ValidationError(e.what());
        }
      },
      "Fault injection for tests: fill stage STAGE's gradients with NaN after the backward of step "
      "STEP (from 1), to exercise train.on_nonfinite")
      ->type_name("STAGE:STEP");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }

  try {
    if (*plan) return cmd_plan(spec_path, plan_options);
    if (*train) return cmd_train(spec_path, steps);
    if (*verify) return cmd_verify(spec_path, tolerance);
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
    spdlog::error("{}", ppctl::comm::error_text(e));
    return kExitFailure;
  }
  return kExitFailure;
}
