// The Chrome-trace/Perfetto layout ppctl's traces share (ppctl plan --trace and the measured
// trace.json): one process, one track per rank named "rank R", so the two open side by side.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace ppctl::schedule {

/// The metadata event naming the trace's one process (pid 0), e.g. "ppctl plan (simulated)".
inline nlohmann::json chrome_process_name(const std::string& name) {
  return {{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0}, {"args", {{"name", name}}}};
}

/// The metadata event naming track `tid` `name` (e.g. "rank 0 collectives" beside the rank tracks).
inline nlohmann::json chrome_named_track(int64_t tid, const std::string& name) {
  return {{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", tid}, {"args", {{"name", name}}}};
}

/// The metadata event naming rank `rank`'s track (tid = rank): "rank R".
inline nlohmann::json chrome_track_name(int64_t rank) {
  return chrome_named_track(rank, fmt::format("rank {}", rank));
}

/// A slice's "ts" or "dur" (microseconds) for `ns` whole nanoseconds, written so that every reader gets `ns`
/// back. Perfetto's JSON importer truncates value * 1000.0 to whole nanoseconds (CoerceToTs in google/perfetto's
/// src/trace_processor/importers/json/json_utils.cc), and (ns / 1000.0) * 1000.0 falls just below ns for about
/// 0.8 % of values: an action that starts where the wait before it ends then started 1 ns inside it, and the
/// slices no longer nested (issue 26). For those values a quarter nanosecond further from zero keeps both
/// truncation and rounding at ns (for |ns| below 2^47, 39 hours); the others are ns / 1000.0 as they were.
/// tests/support/trace_nesting.py checks traces with Perfetto's arithmetic.
inline double chrome_trace_us(int64_t ns) {
  const double us = static_cast<double>(ns) / 1000.0;
  if (static_cast<int64_t>(us * 1000.0) == ns) return us;
  return (static_cast<double>(ns) + (ns < 0 ? -0.25 : 0.25)) / 1000.0;
}

}  // namespace ppctl::schedule
