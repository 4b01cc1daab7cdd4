// Tests for observe/trace_merge: the ranks' parts merged into one trace, missing ranks listed.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "observe/trace_merge.hpp"
#include "runtime/trace.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_json.hpp"

namespace fs = std::filesystem;
using ppctl::runtime::TraceRecorder;
using ppctl::schedule::Action;
using ppctl::schedule::ActionKind;
using ppctl::test::read_json;
using ppctl::test::slices;
using ppctl::test::TempDir;
using Kind = TraceRecorder::Kind;

TEST_CASE("merging parts: one named track per rank, times from the origin, missing ranks listed",
          "[runtime][trace]") {
  TempDir dir("ppctl_trace_test_");
  const auto t0 = TraceRecorder::Clock::now();
  const int64_t origin = ppctl::runtime::wall_clock_us();
  for (int rank : {0, 2}) {  // rank 1 left no part (say it was killed)
    TraceRecorder trace(rank, 1);
    trace.add(Kind::Compute, 0, Action{ActionKind::F, rank, 0}, t0, t0 + std::chrono::milliseconds(2));
    trace.add(Kind::Compute, 0, Action{ActionKind::B, rank, 0}, t0 + std::chrono::milliseconds(2),
              t0 + std::chrono::milliseconds(6));
    trace.write((dir.path / ppctl::runtime::trace_part_name(rank)).string());
  }
  REQUIRE(fs::exists(dir.path / "trace.rank0.json"));

  const auto merge = ppctl::observe::merge_trace_parts(dir.path.string(), 3, origin);
  CHECK(merge.ranks_merged == std::vector<int>{0, 2});
  CHECK(merge.ranks_missing == std::vector<int>{1});
  CHECK(merge.events == 4);
  REQUIRE(merge.path == (dir.path / "trace.json").string());
  CHECK_FALSE(fs::exists(dir.path / "trace.rank0.json"));  // merged parts are removed

  const auto json = read_json(merge.path);
  std::set<std::string> tracks;
  for (const auto& e : json["traceEvents"])
    if (e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
  CHECK(tracks == std::set<std::string>{"rank 0", "rank 1", "rank 2"});
  const auto events = slices(json);
  REQUIRE(events.size() == 4);
  for (const auto& e : events) {
    // t0 was read just before `origin`: relative times are small and may be a few µs negative.
    CHECK(std::abs(e["ts"].get<double>()) < 1e5 + 6000);
    CHECK(e["tid"] == e["args"]["stage"]);
  }
  CHECK(events[1]["name"] == "0B0");
  CHECK(events[1]["ts"].get<double>() - events[0]["ts"].get<double>() == Catch::Approx(2000.0).margin(0.01));
}

TEST_CASE("merging without any part writes nothing", "[runtime][trace]") {
  TempDir dir("ppctl_trace_test_");
  std::ofstream(dir.path / "trace.rank0.json") << "{ truncated";  // unreadable: a rank died writing it
  const auto merge = ppctl::observe::merge_trace_parts(dir.path.string(), 2, 0);
  CHECK(merge.path.empty());
  CHECK(merge.ranks_missing == std::vector<int>{0, 1});
  CHECK_FALSE(fs::exists(dir.path / "trace.json"));
}

TEST_CASE("merged slices that follow each other nest to the nanosecond as Perfetto reads them", "[runtime][trace]") {
  // 2000 slices back to back, each 1001 + k ns long: ns / 1000.0 alone would be read 1 ns short (truncated) for
  // hundreds of their starts and durations, and a slice would start inside the one before it (issue 26).
  TempDir dir("ppctl_trace_test_");
  const int64_t origin = ppctl::runtime::wall_clock_us();
  const auto t0 = TraceRecorder::Clock::now() + std::chrono::milliseconds(1);
  TraceRecorder trace(0, 1);
  auto at = t0;
  for (int k = 0; k < 2000; ++k) {
    const auto end = at + std::chrono::nanoseconds(1001 + k);
    trace.add(Kind::Compute, 0, Action{ActionKind::F, 0, k}, at, end);
    at = end;
  }
  trace.write((dir.path / ppctl::runtime::trace_part_name(0)).string());
  const auto merge = ppctl::observe::merge_trace_parts(dir.path.string(), 1, origin);
  const auto events = slices(read_json(merge.path));
  REQUIRE(events.size() == 2000);
  const auto perfetto_ns = [](const nlohmann::json& value) {  // Perfetto's importer: truncated nanoseconds
    return static_cast<int64_t>(value.get<double>() * 1000.0);
  };
  for (size_t k = 0; k + 1 < events.size(); ++k) {
    INFO("slice " << k << ": ts " << events[k]["ts"] << " dur " << events[k]["dur"]);
    REQUIRE(perfetto_ns(events[k]["dur"]) == 1001 + static_cast<int64_t>(k));
    REQUIRE(perfetto_ns(events[k]["ts"]) + perfetto_ns(events[k]["dur"]) == perfetto_ns(events[k + 1]["ts"]));
  }
}
