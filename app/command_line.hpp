// What both ppctl executables' command lines share: the top level (description, --version), parsing, and the
// mapping of exceptions to messages and exit codes (0 ok, 1 runtime failure, 2 bad input).
#pragma once

#include <exception>
#include <functional>
#include <optional>
#include <string>

#include "core/error.hpp"

namespace CLI {
class App;
}

namespace ppctl::app {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;
// `ppctl plan --tune`: no configuration passes the rules and fits the memory limit.
inline constexpr int kExitNothingFits = 4;
// 75, a job stopped on a signal with a checkpoint (resumable): launch::kExitStoppedResumable.

/// `ppctl train --resume auto`: this run's latest checkpoint, or a fresh start (a folder named auto: ./auto).
inline constexpr const char* kResumeAuto = "auto";

/// Sets up the top level of ppctl's command line on `app`: its description, one subcommand required, --version.
void describe_ppctl(CLI::App& app);

/// Parses the command line. Returns the exit code when parsing ends the command (0 after --help or
/// --version, 2 after bad arguments; CLI11 printed the text), nothing when a command is to run.
std::optional<int> parse_arguments(CLI::App& app, int argc, char** argv);

/// Bad input found before anything started: prints the message and "nothing was started"; returns 2.
int not_started(const ppctl::Error& e);

/// Runs `command` and returns its exit code; an exception becomes a message on stderr and an exit code:
/// ppctl::ConfigError (every problem, one line each), PlanError, ScheduleError and CheckpointError exit 2
/// ("nothing was started"); any other is logged with `text` (its readable text, e.g. comm::error_text,
/// which drops LibTorch's backtraces) and exits 2 when core::is_bad_input says so, else 1.
int run_command(const std::function<int()>& command, std::string (*text)(const std::exception&));

}  // namespace ppctl::app
