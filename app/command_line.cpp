// The shared top level of ppctl's command line and its exception-to-exit-code mapping (see command_line.hpp).
#include "command_line.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "core/bad_input.hpp"

namespace ppctl::app {

void describe_ppctl(CLI::App& app) {
  app.description("ppctl: pipeline-parallel training launcher");
  app.require_subcommand(1);
  app.set_version_flag("--version", "ppctl 0.1.0");
}

std::optional<int> parse_arguments(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitBadInput;
  }
  return std::nullopt;
}

int not_started(const ppctl::Error& e) {
  std::cerr << "error: " << e.what() << "\nnothing was started\n";
  return kExitBadInput;
}

int run_command(const std::function<int()>& command, std::string (*text)(const std::exception&)) {
  try {
    return command();
  } catch (const ppctl::ConfigError& e) {
    for (const auto& line : e.problems()) std::cerr << "error: " << line << '\n';
    std::cerr << fmt::format("{} problem(s) in the job spec; nothing was started\n", e.problems().size());
    return kExitBadInput;
  } catch (const ppctl::PlanError& e) {
    return not_started(e);
  } catch (const ppctl::ScheduleError& e) {
    return not_started(e);
  } catch (const ppctl::CheckpointError& e) {
    return not_started(e);
  } catch (const std::exception& e) {
    spdlog::error("{}", text(e));
    return ppctl::is_bad_input(e) ? kExitBadInput : kExitFailure;  // e.g. MASTER_ADDR unresolvable
  }
}

}  // namespace ppctl::app
