// Trace recording (one rank's executed actions) and merging of the ranks' parts into one Chrome trace.
#include "runtime/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "schedule/chrome_trace.hpp"

namespace ppctl::runtime {
namespace {

using nlohmann::json;

/// The category of a slice: the compute kind (`F`, `B`, `I`, `W`, as `ppctl plan --trace`), or
/// `send`, `recv`, `wait`, `step`, `phase`.
std::string category(TraceRecorder::Kind kind, const schedule::Action& action) {
  switch (kind) {
    case TraceRecorder::Kind::Compute: return schedule::to_string(action.kind);
    case TraceRecorder::Kind::Post: return schedule::is_send(action.kind) ? "send" : "recv";
    case TraceRecorder::Kind::Wait: return "wait";
    case TraceRecorder::Kind::Step: return "step";
    case TraceRecorder::Kind::Phase: break;
  }
  return "phase";
}

}  // namespace

int64_t wall_clock_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TraceRecorder::TraceRecorder(int rank, int64_t max_steps)
    : rank_(rank), max_steps_(max_steps), steady_anchor_(Clock::now()), wall_anchor_us_(wall_clock_us()) {}

void TraceRecorder::add(Kind kind, int64_t step, const schedule::Action& action,
                        Clock::time_point start, Clock::time_point end, const char* label) {
  if (!active(step)) return;
  slices_.push_back({kind, step, action, start, end, label});
}

std::string TraceRecorder::to_json() const {
  const auto micros = [this](Clock::time_point t) {
    return static_cast<double>(wall_anchor_us_) +
           std::chrono::duration<double, std::micro>(t - steady_anchor_).count();
  };
  json events = json::array();
  events.push_back(schedule::chrome_track_name(rank_));
  for (const Slice& s : slices_) {
    json event{{"cat", category(s.kind, s.action)},
               {"ph", "X"},
               {"ts", micros(s.start)},
               {"dur", std::chrono::duration<double, std::micro>(s.end - s.start).count()},
               {"pid", 0},
               {"tid", rank_}};
    json args{{"step", s.step + 1}};
    switch (s.kind) {
      case Kind::Compute:
      case Kind::Post:
        event["name"] = schedule::to_string(s.action);
        args["stage"] = s.action.stage;
        args["microbatch"] = s.action.microbatch;
        break;
      case Kind::Wait:
        event["name"] = s.label[0] != '\0' ? std::string(s.label)
                                           : "wait " + schedule::to_string(s.action);
        break;
      case Kind::Step:
        event["name"] = fmt::format("step {}", s.step + 1);
        break;
      case Kind::Phase:
        event["name"] = s.label;
        break;
    }
    event["args"] = std::move(args);
    events.push_back(std::move(event));
  }
  return json{{"traceEvents", std::move(events)},
              {"displayTimeUnit", "ms"},
              {"ppctl", {{"rank", rank_}, {"clock", "wall-clock microseconds since the Unix epoch"}}}}
      .dump();
}

void TraceRecorder::write(const std::string& path) const { core::write_file_atomically(path, to_json()); }

std::string trace_part_name(int rank) { return fmt::format("trace.rank{}.json", rank); }

TraceMerge merge_trace_parts(const std::string& run_dir, int world_size, int64_t origin_us) {
  namespace fs = std::filesystem;
  TraceMerge merge;
  json events = json::array();
  events.push_back(schedule::chrome_process_name("ppctl train (measured)"));
  std::vector<fs::path> merged_files;
  for (int rank = 0; rank < world_size; ++rank) {
    events.push_back(schedule::chrome_track_name(rank));
    const fs::path part = fs::path(run_dir) / trace_part_name(rank);
    std::ifstream in(part, std::ios::binary);
    json parsed = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!in.is_open() || parsed.is_discarded() || !parsed.contains("traceEvents")) {
      merge.ranks_missing.push_back(rank);
      continue;
    }
    for (auto& event : parsed["traceEvents"]) {
      if (event.value("ph", "") != "X") continue;  // the part's own track name is replaced above
      event["ts"] = event["ts"].get<double>() - static_cast<double>(origin_us);
      event["tid"] = rank;
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

}  // namespace ppctl::runtime
