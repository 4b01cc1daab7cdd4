// Tests for runtime/trace: what a rank records and its JSON part (merging parts: tests/observe/test_trace_merge.cpp).
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/trace.hpp"
#include "support/temp_dir.hpp"
#include "support/trace_json.hpp"

namespace fs = std::filesystem;
using ppctl::test::TempDir;
using ppctl::runtime::TraceRecorder;
using ppctl::schedule::Action;
using ppctl::schedule::ActionKind;
using Kind = TraceRecorder::Kind;

using ppctl::test::slices;

TEST_CASE("a trace recorder that is off records nothing", "[runtime][trace]") {
  TraceRecorder off(0, 0);
  CHECK_FALSE(off.active(0));
  const auto t = TraceRecorder::Clock::now();
  off.add(Kind::Compute, 0, Action{ActionKind::F, 0, 0}, t, t);
  CHECK(off.size() == 0);

  TraceRecorder two(1, 2);  // steps 0 and 1 only
  CHECK(two.active(1));
  CHECK_FALSE(two.active(2));
  two.add(Kind::Compute, 1, Action{ActionKind::F, 1, 0}, t, t);
  two.add(Kind::Compute, 2, Action{ActionKind::F, 1, 1}, t, t);
  CHECK(two.size() == 1);
}

TEST_CASE("a rank's part names each slice as ppctl plan --trace does, in wall-clock microseconds",
          "[runtime][trace]") {
  const int64_t before_us = ppctl::runtime::wall_clock_us();
  TraceRecorder trace(3, 10);
  const auto t0 = TraceRecorder::Clock::now();
  const auto ms = [&](int n) { return t0 + std::chrono::milliseconds(n); };
  trace.add(Kind::Wait, 4, Action{ActionKind::RECV_F, 3, 2}, ms(0), ms(1));
  trace.add(Kind::Compute, 4, Action{ActionKind::F, 3, 2}, ms(1), ms(3));
  trace.add(Kind::Post, 4, Action{ActionKind::SEND_F, 3, 2}, ms(3), ms(4));
  trace.add(Kind::Wait, 4, {}, ms(4), ms(5), "wait sends");
  trace.add(Kind::Step, 4, {}, ms(0), ms(5));
  trace.add(Kind::Phase, 4, {}, ms(5), ms(7), "optimizer");
  const int64_t after_us = ppctl::runtime::wall_clock_us();

  const auto json = nlohmann::json::parse(trace.to_json());
  CHECK(json["ppctl"]["rank"] == 3);
  const auto events = slices(json);
  REQUIRE(events.size() == 6);
  const std::vector<std::string> names{"wait 3RECV_F2", "3F2", "3SEND_F2", "wait sends", "step 5", "optimizer"};
  const std::vector<std::string> categories{"wait", "F", "send", "wait", "step", "phase"};
  const std::vector<double> durations_us{1000, 2000, 1000, 1000, 5000, 2000};
  for (size_t i = 0; i < events.size(); ++i) {
    INFO(events[i].dump());
    for (const char* field : {"ph", "ts", "dur", "pid", "tid", "name"}) CHECK(events[i].contains(field));
    CHECK(events[i]["name"] == names[i]);
    CHECK(events[i]["cat"] == categories[i]);
    CHECK(events[i]["tid"] == 3);
    CHECK(events[i]["pid"] == 0);
    CHECK(events[i]["dur"].get<double>() == Catch::Approx(durations_us[i]).margin(0.01));
    CHECK(events[i]["args"]["step"] == 5);
  }
  CHECK(events[1]["args"]["stage"] == 3);
  CHECK(events[1]["args"]["microbatch"] == 2);
  // Wall-clock: the first slice began between the two readings around the recorder's construction.
  const double first_ts = events[0]["ts"].get<double>();
  CHECK(first_ts >= static_cast<double>(before_us) - 1.0);
  CHECK(first_ts <= static_cast<double>(after_us) + 1.0);
  CHECK(events[1]["ts"].get<double>() - first_ts == Catch::Approx(1000.0).margin(0.01));
}
