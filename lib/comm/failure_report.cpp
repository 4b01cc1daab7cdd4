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

bool publish_failure(const RendezvousInfo& info, std::chrono::milliseconds timeout,
                     const FailureReport& report) {
  if (info.host_store) return false;
  try {
    const auto store = join_store(info, timeout);
    const auto text = encode_failure(report);
    store->set(failure_key(info.rank), std::vector<uint8_t>(text.begin(), text.end()));
    store->get(failure_key(info.rank));  // a round trip: the server has processed the set
    return true;
  } catch (const std::exception& e) {
    spdlog::debug("cannot publish this rank's failure: {}", error_text(e));
    return false;
  }
}

}  // namespace ppctl::comm
