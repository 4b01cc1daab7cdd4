// Tests for observe/bubble_report: measured bubbles against the plan and the measured-cost simulation.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>

#include <vector>

#include "observe/bubble_report.hpp"
#include "schedule/generate.hpp"

using namespace ppctl::observe;
using Catch::Approx;

namespace {

/// 1F1B on 2 ranks, 4 microbatches (stage s on rank s).
ppctl::schedule::Program one_f_one_b() {
  return ppctl::schedule::generate(ppctl::config::ScheduleKind::OneFOneB, 2, 4);
}

/// A rank that ran m forwards of `f` ms and m backwards of `b` ms in `schedule` ms per step, over 3 steps.
RankTiming timing(double f, double b, double schedule) {
  RankTiming t;
  t.steps = 3;
  t.schedule_ms = 3 * schedule;
  t.compute_ms = {3 * 4 * f, 3 * 4 * b, 0, 0};
  t.compute_count = {3 * 4, 3 * 4, 0, 0};
  return t;
}

}  // namespace

TEST_CASE("costs as the plan assumes: measured, planned and simulated bubbles agree", "[observe][bubble]") {
  const auto program = one_f_one_b();
  // F 1 ms, B 2 ms: the simulated 1F1B step of p = 2, m = 4 is (m + p - 1) * 3 = 15 ms.
  const auto report = compare_bubbles(program, {timing(1, 2, 15), timing(1, 2, 15)});
  REQUIRE(report.measured.size() == 2);
  for (size_t r = 0; r < 2; ++r) {
    CHECK(report.measured[r] == Approx(1.0 - 12.0 / 15.0));
    CHECK(report.planned[r] == Approx(0.2));
    CHECK(report.simulated[r] == Approx(0.2));
  }
  CHECK(report.simulated_step_ms == Approx(15.0));
  CHECK(report.measured_step_ms == Approx(15.0));
}

TEST_CASE("a slow last stage: the simulation with measured costs shows the bubble it makes", "[observe][bubble]") {
  const auto program = one_f_one_b();
  // Rank 1 takes twice as long per action: rank 0 waits. Simulated with these costs rank 0 computes
  // 12 ms of a longer step; the plan (equal costs) does not see it.
  const auto report = compare_bubbles(program, {timing(1, 2, 30), timing(2, 4, 28)});
  CHECK(report.planned[0] == Approx(0.2));
  CHECK(report.simulated[0] > 0.4);
  CHECK(report.simulated[1] < report.simulated[0]);
  CHECK(report.simulated_step_ms > 24.0);  // at least rank 1's own compute
  CHECK(report.measured_step_ms == Approx(30.0));  // the slowest rank's mean
  CHECK(report.measured[0] == Approx(1.0 - 12.0 / 30.0));
  const auto text = format_bubble_report(report);
  CHECK(text.find("rank 0: 0.600 | 0.200 | ") != std::string::npos);
  CHECK(text.find("measured 30.00 ms") != std::string::npos);
}

TEST_CASE("the measured cost model: each stage gets its rank's mean per kind", "[observe][bubble]") {
  const auto program = one_f_one_b();
  auto slow = timing(2, 4, 28);
  slow.compute_ms[2] = 9.0;  // I ran on no rank: a count of 0 keeps its cost at 0
  const auto costs = measured_cost_model(program, {timing(1, 2, 30), slow});
  REQUIRE(costs.stages.size() == 2);
  CHECK(costs.stages[0].forward == Approx(1.0));
  CHECK(costs.stages[0].backward == Approx(2.0));
  CHECK(costs.stages[1].forward == Approx(2.0));
  CHECK(costs.stages[1].backward == Approx(4.0));
  CHECK(costs.stages[1].input_grad == 0.0);
  CHECK(costs.p2p_latency == 0.0);
}

TEST_CASE("rank timings packed side by side come back whole, every field, and stay in their own slot",
          "[observe][bubble]") {
  // The observer all-reduces every rank's timing in one flat buffer; a slot that writes or reads past its end
  // mixes a neighbour's values into this rank's (a W count read from the next rank's peak memory did once).
  constexpr size_t kRanks = 3, kGuard = 1;
  constexpr size_t kSlot = kGuard + kRankTimingValues;
  std::vector<double> flat(kRanks * kSlot, -1.0);
  std::vector<RankTiming> sent(kRanks);
  for (size_t r = 0; r < kRanks; ++r) {
    RankTiming& t = sent[r];
    const double base = 100.0 * static_cast<double>(r + 1);
    t.steps = static_cast<int64_t>(base) + 1;
    t.schedule_ms = base + 2.5;
    for (size_t k = 0; k < 4; ++k) {
      t.compute_ms[k] = base + 10.25 + static_cast<double>(k);
      t.compute_count[k] = static_cast<int64_t>(base) + 20 + static_cast<int64_t>(k);
    }
    flat[r * kSlot] = 7000.0 + static_cast<double>(r);  // a neighbouring value (the observer's peak memory)
    pack_rank_timing(t, &flat[r * kSlot + kGuard]);
  }
  for (size_t r = 0; r < kRanks; ++r) {
    CAPTURE(r);
    CHECK(flat[r * kSlot] == 7000.0 + static_cast<double>(r));
    const RankTiming back = unpack_rank_timing(&flat[r * kSlot + kGuard]);
    CHECK(back.steps == sent[r].steps);
    CHECK(back.schedule_ms == sent[r].schedule_ms);
    CHECK(back.compute_ms == sent[r].compute_ms);
    CHECK(back.compute_count == sent[r].compute_count);
  }
}
