// Test support: reading a Chrome-trace JSON file and its complete ("X") events, for the trace tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

namespace ppctl::test {

/// The JSON document in `path` (throws nlohmann::json::parse_error when it is not JSON).
inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

/// The complete ("X") events of a trace.
inline std::vector<nlohmann::json> slices(const nlohmann::json& trace) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") out.push_back(e);
  return out;
}

}  // namespace ppctl::test
