// Tests of schedule/chrome_trace: slice times that Perfetto's importer reads back to the nanosecond.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "schedule/chrome_trace.hpp"

using ppctl::schedule::chrome_trace_us;

namespace {

/// What Perfetto's JSON importer makes of a "ts" or "dur": whole nanoseconds by truncation (CoerceToTs).
int64_t perfetto_ns(double us) { return static_cast<int64_t>(us * 1000.0); }

/// chrome_trace_us(ns) written to JSON text and read back, as a trace file carries it.
double through_json(int64_t ns) {
  return nlohmann::json::parse(nlohmann::json(chrome_trace_us(ns)).dump()).get<double>();
}

}  // namespace

TEST_CASE("chrome_trace_us: Perfetto's truncation and rounding both give the nanoseconds back", "[schedule][trace]") {
  std::vector<int64_t> values;
  for (int64_t ns = -3000; ns < 300000; ++ns) values.push_back(ns);
  for (int64_t k = 0; k < 20000; ++k) values.push_back(86'400'000'000'000 + 7919 * k);  // a day into a run
  int64_t plain_wrong = 0;
  for (const int64_t ns : values) {
    const double us = through_json(ns);
    INFO("ns " << ns << " written as " << us);
    REQUIRE(perfetto_ns(us) == ns);
    REQUIRE(std::llround(us * 1000.0) == ns);
    if (perfetto_ns(static_cast<double>(ns) / 1000.0) != ns) ++plain_wrong;
  }
  // ns / 1000.0 alone is read 1 ns short often enough to matter (1.001 us is Perfetto's 1000 ns).
  CHECK(perfetto_ns(1.001) == 1000);
  CHECK(plain_wrong > 1000);
}

TEST_CASE("chrome_trace_us keeps values that need no correction as they were", "[schedule][trace]") {
  CHECK(chrome_trace_us(2'000'000) == 2000.0);
  CHECK(chrome_trace_us(1'234'567) == 1234.567);
  CHECK(chrome_trace_us(0) == 0.0);
  CHECK(chrome_trace_us(1001) != 1.001);  // would truncate to 1000 ns
}
