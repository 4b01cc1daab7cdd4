// The Chrome-trace/Perfetto layout ppctl's traces share (ppctl plan --trace and the measured
// trace.json): one process, one track per rank named "rank R", so the two open side by side.
#pragma once

#include <fmt/format.h>

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

}  // namespace ppctl::schedule
