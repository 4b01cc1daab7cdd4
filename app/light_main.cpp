// ppctl, the light front of the command line: runs `ppctl plan` and `ppctl help` itself, without LibTorch (loading
// its ~480 MB of libraries took longer than planning a 1,024-rank job), and replaces itself (exec: same pid, arguments,
// environment and signals) with ppctl-torch, beside it, for every other command, --help and --version, after
// checking that this user can read the LibTorch library ppctl-torch was linked against (PPCTL_TORCH_LIBRARY).
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <string>

#include "command_line.hpp"
#include "help_command.hpp"
#include "core/log.hpp"
#include "launch/library_access.hpp"
#include "launch/sibling.hpp"
#include "launch/stop_signals.hpp"
#include "plan_command.hpp"

namespace {

std::string what_text(const std::exception& e) { return e.what(); }

}  // namespace

int main(int argc, char** argv) {
  const bool light = argc >= 2 && (std::strcmp(argv[1], "plan") == 0 || std::strcmp(argv[1], "help") == 0);
  if (!light) {
    // The loader would fail with a bare exit 127 after the exec: say which folder this user cannot read.
    if (const auto why = ppctl::launch::library_unreachable(PPCTL_TORCH_LIBRARY, std::getenv("LD_LIBRARY_PATH"))) {
      std::cerr << "error: cannot run " << (argc < 2 ? std::string("ppctl") : std::string("`ppctl ") + argv[1] + "`")
                << ": " << *why << '\n';
      return ppctl::app::kExitFailure;
    }
    // `train` handles the stop signals (train.on_signal), but only once ppctl-torch has loaded LibTorch (a
    // second or more from a cold disk) and reached its handlers: until then a SIGTERM or SIGUSR1 would end
    // it silently by the default action. Held blocked across the exec (the mask survives it), a signal waits
    // for the handlers, which unblock it (StopSignalScope, WorkerSignalScope).
    if (std::strcmp(argv[1], "train") == 0) ppctl::launch::hold_stop_signals();
    const std::string failure = ppctl::launch::exec_sibling(PPCTL_TORCH_EXECUTABLE, argv);  // returns on failure
    std::cerr << "error: " << failure << '\n';
    return ppctl::app::kExitFailure;
  }
  ppctl::core::setup_logging(std::nullopt);
  CLI::App app;
  ppctl::app::describe_ppctl(app);
  std::string spec_path;
  ppctl::app::PlanOptions plan_options;
  auto* plan = ppctl::app::add_plan_command(app, spec_path, plan_options);
  ppctl::app::HelpOptions help_options;
  ppctl::app::add_help_command(app, help_options);
  if (const auto code = ppctl::app::parse_arguments(app, argc, argv)) return *code;
  return ppctl::app::run_command(
      [&] { return *plan ? ppctl::app::run_plan(spec_path, plan_options) : ppctl::app::run_help(help_options); },
      what_text);
}
