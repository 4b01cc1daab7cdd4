// Benchmark (not a test): what tracing costs a rank. Records N compute slices (two clock reads and an
// append each, as the executor does), then serialises them (as a rank's part at the end), and prints
// the cost per slice. Usage: trace_cost [N] (default 1000000).
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "runtime/trace.hpp"

int main(int argc, char** argv) {
  using ppctl::runtime::TraceRecorder;
  using Clock = TraceRecorder::Clock;
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 1'000'000;
  TraceRecorder trace(0, 1);
  TraceRecorder off(0, 0);
  const ppctl::schedule::Action action{ppctl::schedule::ActionKind::F, 1, 3};

  const auto t0 = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    const auto start = Clock::now();
    trace.add(TraceRecorder::Kind::Compute, 0, action, start, Clock::now());
  }
  const auto t1 = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    if (off.active(0)) off.add(TraceRecorder::Kind::Compute, 0, action, Clock::now(), Clock::now());
  }
  const auto t2 = Clock::now();
  const std::string json = trace.to_json();
  const auto t3 = Clock::now();

  const auto ns = [n](Clock::duration d) {
    return std::chrono::duration<double, std::nano>(d).count() / static_cast<double>(n);
  };
  fmt::print("{} slices: record {:.1f} ns each (two clock reads + append), off {:.2f} ns each, "
             "serialise {:.0f} ns each ({} bytes of JSON, {:.0f} per slice)\n",
             n, ns(t1 - t0), ns(t2 - t1), ns(t3 - t2), json.size(),
             static_cast<double>(json.size()) / static_cast<double>(n));
  return 0;
}
