// Merging the ranks' trace parts into one Chrome trace (trace_merge.hpp).
#include "observe/trace_merge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "core/atomic_file.hpp"
#include "plan/parallel.hpp"
#include "runtime/trace.hpp"
#include "schedule/chrome_trace.hpp"

namespace ppctl::observe {

using nlohmann::json;
using runtime::trace_part_name;

TraceMerge merge_trace_parts(const std::string& run_dir, int world_size, int64_t origin_us, int64_t data_parallel,
                             int64_t tensor_parallel) {
  namespace fs = std::filesystem;
  TraceMerge merge;
  json events = json::array();
  events.push_back(schedule::chrome_process_name("ppctl train (measured)"));
  std::vector<fs::path> merged_files;
  std::set<int> collective_tracks;  // ranks whose collectives track is named
  // the traced ranks are tp rank 0 of replica 0's pipeline
  const plan::RankGrid grid(tensor_parallel, data_parallel, world_size);
  for (int rank = 0; rank < world_size; ++rank) {
    events.push_back(schedule::chrome_named_track(rank, plan::replica0_rank_name(rank, grid)));
    const fs::path part = fs::path(run_dir) / trace_part_name(rank);
    std::ifstream in(part, std::ios::binary);
    json parsed = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!in.is_open() || parsed.is_discarded() || !parsed.contains("traceEvents")) {
      merge.ranks_missing.push_back(rank);
      continue;
    }
    for (auto& event : parsed["traceEvents"]) {
      if (event.value("ph", "") != "X") continue;  // the part's own track name is replaced above
      // From the run's start, exact to the nanosecond when the part has ts_ns (a double of microseconds
      // since the epoch keeps only quarter microseconds; slices would overlap the ones they follow), and
      // written so that Perfetto reads the same nanoseconds (schedule::chrome_trace_us).
      const bool exact = event.contains("ts_ns") && event["ts_ns"].is_number_integer();
      const int64_t start_ns =
          exact ? event["ts_ns"].get<int64_t>() - origin_us * 1000
                : std::llround((event["ts"].get<double>() - static_cast<double>(origin_us)) * 1000.0);
      event.erase("ts_ns");
      event["ts"] = schedule::chrome_trace_us(start_ns);
      event["dur"] = schedule::chrome_trace_us(std::llround(event["dur"].get<double>() * 1000.0));
      // Gradient reductions run beside the schedule: a track of their own below the ranks'.
      const bool collective = event.value("cat", "") == "reduce";
      event["tid"] = collective ? world_size + rank : rank;
      if (collective && collective_tracks.insert(rank).second) {
        events.push_back(schedule::chrome_named_track(world_size + rank,
                                                      plan::replica0_rank_name(rank, grid) + " collectives"));
      }
      events.push_back(std::move(event));
      ++merge.events;
    }
    merge.ranks_merged.push_back(rank);
    merged_files.push_back(part);
  }
  if (merge.ranks_merged.empty()) return merge;
  // Track names first, then each track in time order, an enclosing slice before what it encloses.
  std::stable_sort(events.begin(), events.end(), [](const json& a, const json& b) {
    const bool meta_a = a["ph"] == "M", meta_b = b["ph"] == "M";
    if (meta_a || meta_b) return meta_a && !meta_b;
    const auto key = [](const json& e) {
      return std::make_tuple(e["tid"].get<int>(), e["ts"].get<double>(), -e["dur"].get<double>());
    };
    return key(a) < key(b);
  });
  merge.path = (fs::path(run_dir) / "trace.json").string();
  core::write_file_atomically(
      merge.path, json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump());
  std::error_code ignored;
  for (const auto& file : merged_files) fs::remove(file, ignored);
  return merge;
}

}  // namespace ppctl::observe
