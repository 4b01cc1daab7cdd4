// Trace recording: one rank's executed actions as its JSON part of the run's trace.
#include "runtime/trace.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "schedule/chrome_trace.hpp"

namespace ppctl::runtime {
namespace {

using nlohmann::json;

/// The category of a slice: the compute kind (`F`, `B`, `I`, `W`, as `ppctl plan --trace`), or
/// `send`, `recv`, `reduce`, `wait`, `step`, `phase`.
std::string category(TraceRecorder::Kind kind, const schedule::Action& action) {
  switch (kind) {
    case TraceRecorder::Kind::Compute: return schedule::to_string(action.kind);
    case TraceRecorder::Kind::Post: return schedule::is_send(action.kind) ? "send" : "recv";
    case TraceRecorder::Kind::Collective: return "reduce";
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
  // Also the start in whole nanoseconds: a double of microseconds since the epoch (about 1.8e15) keeps only
  // quarter microseconds, so a slice's start could fall before the end of the one it follows;
  // merge_trace_parts makes times relative to the run's start from these.
  const auto nanos = [this](Clock::time_point t) {
    return wall_anchor_us_ * 1000 + std::chrono::duration_cast<std::chrono::nanoseconds>(t - steady_anchor_).count();
  };
  json events = json::array();
  events.push_back(schedule::chrome_track_name(rank_));
  for (const Slice& s : slices_) {
    json event{{"cat", category(s.kind, s.action)},
               {"ph", "X"},
               {"ts", micros(s.start)},
               {"ts_ns", nanos(s.start)},
               {"dur", static_cast<double>(nanos(s.end) - nanos(s.start)) / 1000.0},
               {"pid", 0},
               {"tid", rank_}};
    json args{{"step", s.step + 1}};
    switch (s.kind) {
      case Kind::Compute:
      case Kind::Post:
      case Kind::Collective:
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

}  // namespace ppctl::runtime
