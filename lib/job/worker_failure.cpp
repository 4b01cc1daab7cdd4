// A failing worker's last words: log line, exit code, failure report in the launcher's store.
#include "job/worker_failure.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <regex>

#include "comm/error_text.hpp"
#include "comm/failure_report.hpp"
#include "comm/rendezvous.hpp"
#include "core/bad_input.hpp"
#include "core/error.hpp"

namespace ppctl::job {
namespace {

/// How long a failing worker tries to reach the launcher's store: it is on this machine and up.
constexpr std::chrono::milliseconds kPublishTimeout{3000};

}  // namespace

std::string one_line_cause(const std::exception& e) {
  std::string text = comm::error_text(e);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  for (size_t at; (at = text.find('\n')) != std::string::npos;) text.replace(at, 1, "; ");
  static const std::regex rank_prefix("^rank [0-9]+: ");
  return std::regex_replace(text, rank_prefix, "", std::regex_constants::format_first_only);
}

int report_worker_failure(const std::exception& e, bool publish) {
  const int code = is_bad_input(e) ? kWorkerExitBadInput : kWorkerExitFailure;
  try {
    spdlog::error("{}", comm::error_text(e));
    if (publish) {
      const bool peer = dynamic_cast<const CommError*>(&e) != nullptr && code != kWorkerExitBadInput;
      comm::FailureReport report{code, one_line_cause(e), peer};
      comm::publish_failure(comm::rendezvous_from_env(), kPublishTimeout, report);
    }
  } catch (const std::exception&) {  // no identity in the environment: nobody to tell
  }
  return code;
}

}  // namespace ppctl::job
