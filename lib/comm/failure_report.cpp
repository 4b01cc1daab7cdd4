// Failure reports on the rendezvous store: encoding, and the worker's publishing client.
#include "comm/failure_report.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "comm/error_text.hpp"
#include "comm/tcp_store.hpp"

namespace ppctl::comm {

std::string failure_key(int rank) { return fmt::format("ppctl/failure/{}", rank); }

std::string encode_failure(const FailureReport& report) {
  return nlohmann::json{{"exit_code", report.exit_code}, {"cause", report.cause}, {"peer_failure", report.peer_failure}}
      .dump();
}

std::optional<FailureReport> decode_failure(const std::string& text) {
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return std::nullopt;
  try {
    return FailureReport{json.at("exit_code").get<int>(), json.at("cause").get<std::string>(),
                         json.at("peer_failure").get<bool>()};
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

namespace {

/// Sets `key` to `text` in the store through a client of its own, and reads it back (the server has then
/// processed the set). False, logged at debug level as `what`, when the store cannot be reached.
bool publish(const RendezvousInfo& info, std::chrono::milliseconds timeout, const std::string& key,
             const std::string& text, const char* what) {
  if (info.host_store) return false;
  try {
    const auto store = join_store(info, timeout);
    store->set(key, std::vector<uint8_t>(text.begin(), text.end()));
    store->get(key);
    return true;
  } catch (const std::exception& e) {
    spdlog::debug("cannot publish this rank's {}: {}", what, error_text(e));
    return false;
  }
}

}  // namespace

bool publish_failure(const RendezvousInfo& info, std::chrono::milliseconds timeout,
                     const FailureReport& report) {
  return publish(info, timeout, failure_key(info.rank), encode_failure(report), "failure");
}

std::string stop_key(int rank) { return fmt::format("ppctl/stopped/{}", rank); }

bool publish_stop(const RendezvousInfo& info, std::chrono::milliseconds timeout, int exit_code) {
  return publish(info, timeout, stop_key(info.rank), nlohmann::json{{"exit_code", exit_code}}.dump(), "stop");
}

std::optional<int> decode_stop(const std::string& text) {
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("exit_code") || !json["exit_code"].is_number_integer()) return std::nullopt;
  return json["exit_code"].get<int>();
}

}  // namespace ppctl::comm
