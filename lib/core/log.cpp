// Logging setup for launcher and workers.
#include "core/log.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "core/error.hpp"

namespace ppctl::core {
namespace {

/// The pattern of every line after its time: "[rank R] level: message"; set by setup_logging.
std::string g_who = "ppctl";

/// spdlog's own failures (a log file on a full disk): one line in ppctl's words, once per process,
/// instead of spdlog's "[*** LOG ERROR ***]" line for every failed write. Writes to stderr directly:
/// logging from here would fail again.
void on_log_error(const std::string& message) {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true)) return;
  std::fprintf(stderr,
               "[%s] warning: cannot write to a log file: %s; log lines still reach this output, later "
               "failures are not reported (fix: free space on the file system holding the run "
               "directory, or put it elsewhere with --run-dir or observe.runs_dir)\n",
               g_who.c_str(), message.c_str());
  std::fflush(stderr);
}

}  // namespace

void setup_logging(std::optional<int> rank) {
  // On a terminal the colour sink writes a line in pieces (text, colour code, level, reset, text);
  // unbuffered, the pieces of processes sharing the terminal interleave. A line-buffered stderr
  // hands each line to write(2) whole. Only possible before the first output, hence once.
  static const bool whole_lines = [] {
    return ::isatty(STDERR_FILENO) == 1 && std::setvbuf(stderr, nullptr, _IOLBF, 1 << 16) == 0;
  }();
  (void)whole_lines;
  const std::string name = fmt::format("ppctl-{}", rank ? *rank : -1);
  spdlog::drop(name);
  auto logger = spdlog::stderr_color_mt(name);
  g_who = rank ? fmt::format("rank {}", *rank) : std::string("ppctl");
  const char* erase = ::isatty(STDERR_FILENO) == 1 ? "\r\x1b[K" : "";
  logger->set_pattern(fmt::format("{}[%H:%M:%S.%e] [{}] %^%l%$: %v", erase, g_who));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  spdlog::set_error_handler(on_log_error);
}

void add_log_file(const std::string& path) {
  std::shared_ptr<spdlog::sinks::basic_file_sink_mt> sink;
  try {
    sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path);
  } catch (const spdlog::spdlog_ex& e) {
    throw Error(fmt::format("cannot write the log file {}: {}", path, e.what()));
  }
  sink->set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S.%e] [{}] %l: %v", g_who));
  spdlog::default_logger()->sinks().push_back(std::move(sink));
}

}  // namespace ppctl::core
