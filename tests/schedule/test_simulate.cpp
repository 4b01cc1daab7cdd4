// Tests of the schedule simulator against closed forms and hand-computed timelines, and of its
// ASCII timeline and Chrome trace renderings.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "schedule/action.hpp"
#include "schedule/generate.hpp"
#include "schedule/simulate.hpp"
#include "support/program_text.hpp"

using namespace ppctl;
using namespace ppctl::schedule;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::WithinAbs;
using config::ScheduleKind;
using test::hand_made;

namespace {

/// The same costs on every stage.
CostModel uniform(double forward, double backward, double latency = 0.0) {
  CostModel costs;
  costs.stages = {StageCosts{forward, backward, 1.0, 1.0}};
  costs.p2p_latency = latency;
  return costs;
}

/// An expected compute action with its start and end.
struct Expected {
  std::string action;
  double start;
  double end;
};

/// Checks one rank's simulated timeline against hand-computed times (exact: all are sums of
/// small binary fractions).
void check_timeline(const std::vector<TimedAction>& actual, const std::vector<Expected>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("action " << i << ": " << expected[i].action);
    CHECK(to_string(actual[i].action) == expected[i].action);
    CHECK(actual[i].start == expected[i].start);
    CHECK(actual[i].end == expected[i].end);
  }
}

/// The message simulate() throws for `program` (fails the test if it does not throw).
std::string deadlock_of(const Program& program) {
  try {
    simulate(program, uniform(1, 2));
  } catch (const ScheduleError& e) {
    return e.what();
  }
  FAIL("simulate() completed a program that cannot complete");
  return {};
}

}  // namespace

TEST_CASE("GPipe and 1F1B with equal costs match the closed forms") {
  const int64_t p = GENERATE(1, 2, 3, 4, 8);
  const int64_t m = GENERATE(1, 2, 3, 4, 8, 13);
  const ScheduleKind kind = GENERATE(ScheduleKind::GPipe, ScheduleKind::OneFOneB);
  const double backward = GENERATE(1.0, 2.0);
  const double forward = 1.0;
  INFO("p=" << p << " m=" << m << " kind=" << (kind == ScheduleKind::GPipe ? "gpipe" : "1f1b")
            << " F=" << forward << " B=" << backward);
  const Simulation sim = simulate(generate(kind, p, m), uniform(forward, backward));

  const double bubble = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
  CHECK_THAT(sim.step_time, WithinAbs(static_cast<double>(m + p - 1) * (forward + backward), 1e-9));
  CHECK_THAT(sim.mean_bubble_fraction, WithinAbs(bubble, 1e-12));
  REQUIRE(sim.bubble_fraction.size() == static_cast<size_t>(p));
  REQUIRE(sim.busy_time.size() == static_cast<size_t>(p));
  REQUIRE(sim.peak_activations.size() == static_cast<size_t>(p));
  for (int64_t r = 0; r < p; ++r) {
    INFO("rank " << r);
    const auto ri = static_cast<size_t>(r);
    CHECK_THAT(sim.bubble_fraction[ri], WithinAbs(bubble, 1e-12));
    CHECK_THAT(sim.busy_time[ri], WithinAbs(static_cast<double>(m) * (forward + backward), 1e-9));
    CHECK(sim.timeline[ri].size() == static_cast<size_t>(2 * m));
    CHECK(sim.peak_activations[ri] == (kind == ScheduleKind::GPipe ? m : std::min(p - r, m)));
  }
}

TEST_CASE("communication actions do not change the simulated step") {
  const Program compute = generate_compute(ScheduleKind::OneFOneB, 4, 6);
  const Simulation without = simulate(compute, uniform(1, 2, 0.25));
  const Simulation with = simulate(add_communication(compute), uniform(1, 2, 0.25));
  CHECK(with.step_time == without.step_time);
  REQUIRE(with.timeline.size() == without.timeline.size());
  for (size_t r = 0; r < with.timeline.size(); ++r) {
    REQUIRE(with.timeline[r].size() == without.timeline[r].size());
    for (size_t i = 0; i < with.timeline[r].size(); ++i) {
      CHECK(with.timeline[r][i].action == without.timeline[r][i].action);
      CHECK(with.timeline[r][i].start == without.timeline[r][i].start);
    }
  }
}

TEST_CASE("transfer_post: each SEND and RECV holds its rank's thread that long") {
  const Program program = add_communication(generate_compute(ScheduleKind::OneFOneB, 4, 6));
  const double post = 0.125;
  auto costs = uniform(1, 2, 0.25);
  const double without = simulate(program, costs).step_time;
  costs.transfer_post = post;
  const Simulation with = simulate(program, costs);
  size_t most = 0, total = 0;
  for (const auto& rank : program.ranks) {
    const auto n = static_cast<size_t>(std::count_if(rank.begin(), rank.end(), [](const Action& a) {
      return is_send(a.kind) || is_recv(a.kind);
    }));
    most = std::max(most, n);
    total += n;
  }
  REQUIRE(most > 0);
  // A rank posts its transfers one after another on top of its compute (busy 6 x (1 + 2) per rank here).
  CHECK(with.step_time >= 6 * 3 + static_cast<double>(most) * post);
  CHECK(with.step_time > without);
  CHECK(with.step_time <= without + static_cast<double>(total) * post + 1e-9);
  // The compute itself is unchanged: posting is idle time for the bubble, not busy time.
  for (const double busy : with.busy_time) CHECK(busy == 18.0);
  costs.transfer_post = -1.0;
  CHECK_THROWS_WITH(simulate(program, costs), ContainsSubstring("transfer_post"));
}

TEST_CASE("1F1B, p=2, m=2: the hand-computed timeline") {
  // F=1, B=2. Rank 1 (last stage) runs B(1,j) right after F(1,j); rank 0 waits for each B(1,j).
  const Program program = hand_made(2, {0, 1}, {"0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"});
  SECTION("no latency") {
    const Simulation sim = simulate(program, uniform(1, 2));
    check_timeline(sim.timeline[0], {{"0F0", 0, 1}, {"0F1", 1, 2}, {"0B0", 4, 6}, {"0B1", 7, 9}});
    check_timeline(sim.timeline[1], {{"1F0", 1, 2}, {"1B0", 2, 4}, {"1F1", 4, 5}, {"1B1", 5, 7}});
    CHECK(sim.step_time == 9);
    CHECK(sim.busy_time == std::vector<double>{6, 6});
    CHECK_THAT(sim.bubble_fraction[0], WithinAbs(1.0 / 3.0, 1e-12));
    CHECK(sim.peak_activations == std::vector<int64_t>{2, 1});
  }
  SECTION("p2p latency 0.5 delays every cross-rank dependency") {
    const Simulation sim = simulate(program, uniform(1, 2, 0.5));
    check_timeline(sim.timeline[0], {{"0F0", 0, 1}, {"0F1", 1, 2}, {"0B0", 5, 7}, {"0B1", 8, 10}});
    check_timeline(sim.timeline[1],
                   {{"1F0", 1.5, 2.5}, {"1B0", 2.5, 4.5}, {"1F1", 4.5, 5.5}, {"1B1", 5.5, 7.5}});
    CHECK(sim.step_time == 10);
  }
}

TEST_CASE("p2p latency is added only between stages on different ranks") {
  // F=1, B=2, latency 0.5; stages 0 and 1 share rank 0, stage 2 is on rank 1.
  const Program program = hand_made(1, {0, 0, 1}, {"0F0 1F0 1B0 0B0", "2F0 2B0"});
  const Simulation sim = simulate(program, uniform(1, 2, 0.5));
  check_timeline(sim.timeline[0], {{"0F0", 0, 1}, {"1F0", 1, 2}, {"1B0", 6, 8}, {"0B0", 8, 10}});
  check_timeline(sim.timeline[1], {{"2F0", 2.5, 3.5}, {"2B0", 3.5, 5.5}});
  CHECK(sim.step_time == 10);
  CHECK(sim.peak_activations == std::vector<int64_t>{2, 1});

  // All on one rank: no latency at all.
  const Simulation local = simulate(hand_made(1, {0, 0}, {"0F0 1F0 1B0 0B0"}), uniform(1, 2, 0.5));
  check_timeline(local.timeline[0], {{"0F0", 0, 1}, {"1F0", 1, 2}, {"1B0", 2, 4}, {"0B0", 4, 6}});
}

TEST_CASE("per-stage costs are honoured") {
  CostModel costs;
  costs.stages = {StageCosts{1, 2, 1, 1}, StageCosts{3, 4, 1, 1}};
  const Simulation sim = simulate(hand_made(1, {0, 1}, {"0F0 0B0", "1F0 1B0"}), costs);
  check_timeline(sim.timeline[0], {{"0F0", 0, 1}, {"0B0", 8, 10}});
  check_timeline(sim.timeline[1], {{"1F0", 1, 4}, {"1B0", 4, 8}});
  CHECK(sim.busy_time == std::vector<double>{3, 7});
  CHECK_THAT(sim.mean_bubble_fraction, WithinAbs((0.7 + 0.3) / 2, 1e-12));
}

TEST_CASE("a cost model that fits neither one stage nor every stage is rejected") {
  const Program program = hand_made(1, {0, 1, 2}, {"0F0 0B0", "1F0 1B0", "2F0 2B0"});
  CostModel costs;
  costs.stages = {StageCosts{}, StageCosts{}};
  CHECK_THROWS_WITH(simulate(program, costs), ContainsSubstring("2 stage entries for 3 stages"));
  costs.stages.clear();
  CHECK_THROWS_AS(simulate(program, costs), ScheduleError);
  costs.stages = {StageCosts{-1, 2, 1, 1}};
  CHECK_THROWS_AS(simulate(program, costs), ScheduleError);
}

TEST_CASE("an action on the wrong rank or outside the geometry is rejected") {
  CHECK_THROWS_WITH(simulate(hand_made(1, {0, 1}, {"0F0 1F0 0B0", "1B0"}), uniform(1, 2)),
                    ContainsSubstring("1F0 is on rank 0, but stage 1 runs on rank 1"));
  CHECK_THROWS_AS(simulate(hand_made(1, {0}, {"0F0 0F1 0B0"}), uniform(1, 2)), ScheduleError);
  CHECK_THROWS_AS(simulate(hand_made(1, {0}, {"1F0"}), uniform(1, 2)), ScheduleError);
}

TEST_CASE("a program that cannot complete throws, naming the stuck ranks and actions") {
  SECTION("one rank: a backward before its forward") {
    const std::string message = deadlock_of(hand_made(1, {0}, {"0B0 0F0"}));
    CHECK_THAT(message, ContainsSubstring("deadlock"));
    CHECK_THAT(message, ContainsSubstring("rank 0 at 0B0 waits for 0F0"));
    CHECK_THAT(message, ContainsSubstring("rank 0: [0B0] 0F0"));
  }
  SECTION("two ranks each waiting for the other") {
    // Rank 0 waits for 1B0, which rank 1 runs only after 1F1, which needs 0F1 (after 0B0).
    const std::string message =
        deadlock_of(hand_made(2, {0, 1}, {"0F0 0B0 0F1 0B1", "1F1 1B1 1F0 1B0"}));
    CHECK_THAT(message, ContainsSubstring("rank 0 at 0B0 waits for 1B0 or 1I0"));
    CHECK_THAT(message, ContainsSubstring("rank 1 at 1F1 waits for 0F1"));
  }
  SECTION("with communication actions, the grid marks where each rank stood") {
    const std::string message = deadlock_of(
        hand_made(1, {0, 1}, {"0RECV_B0 0B0 0F0 0SEND_F0", "1RECV_F0 1F0 1B0 1SEND_B0"}));
    CHECK_THAT(message, ContainsSubstring("rank 0: 0RECV_B0 [0B0] 0F0 0SEND_F0"));
    CHECK_THAT(message, ContainsSubstring("rank 1: 1RECV_F0 [1F0] 1B0 1SEND_B0"));
  }
  SECTION("a missing producer") {
    CHECK_THAT(deadlock_of(hand_made(1, {0, 1}, {"0F0 0B0", "1B0"})),
               ContainsSubstring("rank 1 at 1B0 waits for 1F0"));
  }
  SECTION("W before its I") {
    CHECK_THAT(deadlock_of(hand_made(1, {0}, {"0F0 0W0 0I0"})),
               ContainsSubstring("rank 0 at 0W0 waits for 0B0 or 0I0"));
  }
}

TEST_CASE("split backward (I/W): the hand-computed timeline and activations held until W") {
  // F=I=W=1. W(s,j) needs I(s,j); I(0,j) needs I(1,j); I(1,j) needs F(1,j). A B on stage 0 may
  // also follow an I on stage 1.
  const Program program = hand_made(2, {0, 1}, {"0F0 0F1 0I0 0W0 0B1", "1F0 1I0 1F1 1I1 1W0 1W1"});
  const Simulation sim = simulate(program, uniform(1, 2));
  check_timeline(sim.timeline[0],
                 {{"0F0", 0, 1}, {"0F1", 1, 2}, {"0I0", 3, 4}, {"0W0", 4, 5}, {"0B1", 5, 7}});
  check_timeline(
      sim.timeline[1],
      {{"1F0", 1, 2}, {"1I0", 2, 3}, {"1F1", 3, 4}, {"1I1", 4, 5}, {"1W0", 5, 6}, {"1W1", 6, 7}});
  CHECK(sim.step_time == 7);
  CHECK(sim.busy_time == std::vector<double>{6, 6});
  // Rank 1 would hold 1 activation with full backwards (1F0 1B0 1F1 1B1); I keeps them until W.
  CHECK(sim.peak_activations == std::vector<int64_t>{2, 2});
}

TEST_CASE("defer_penalty: a W not right after its own I costs that much more") {
  // The same program as above, W deferred by 0.5 ms. Rank 0's 0W0 follows 0I0: no penalty. Rank 1's 1W0
  // follows 1I1 (not its I) and 1W1 follows 1W0: both pay.
  CostModel costs = uniform(1, 2);
  costs.stages[0].defer_penalty = 0.5;
  const Program program = hand_made(2, {0, 1}, {"0F0 0F1 0I0 0W0 0B1", "1F0 1I0 1F1 1I1 1W0 1W1"});
  const Simulation sim = simulate(program, costs);
  check_timeline(sim.timeline[0],
                 {{"0F0", 0, 1}, {"0F1", 1, 2}, {"0I0", 3, 4}, {"0W0", 4, 5}, {"0B1", 5, 7}});
  check_timeline(sim.timeline[1], {{"1F0", 1, 2}, {"1I0", 2, 3}, {"1F1", 3, 4}, {"1I1", 4, 5}, {"1W0", 5, 6.5},
                                   {"1W1", 6.5, 8}});
  CHECK(sim.step_time == 8);
  // Transfers between I and W do not make a W deferred: only compute actions count.
  const Simulation with_comm = simulate(hand_made(1, {0, 1}, {"0F0 0SEND_F0 0RECV_B0 0I0 0W0", "1RECV_F0 1F0 1I0 "
                                                                                              "1SEND_B0 1W0"}),
                                        costs);
  CHECK(with_comm.step_time == 5);
  // A W of another microbatch in between does.
  CHECK(simulate(hand_made(2, {0}, {"0F0 0F1 0I0 0I1 0W1 0W0"}), costs).step_time == 6.5);
  costs.stages[0].defer_penalty = -1;
  CHECK_THROWS_WITH(simulate(program, costs), ContainsSubstring("stages[0].defer_penalty is -1"));
}

TEST_CASE("format_timeline: one column per ms for the p=2, m=2 1F1B step") {
  const Simulation sim =
      simulate(hand_made(2, {0, 1}, {"0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"}), uniform(1, 2));
  CHECK(format_timeline(sim, 9) ==
        "rank 0 |FF..BB.BB|\n"
        "rank 1 |.FBBFBB..|\n"
        "        0    9 ms  (1 column = 1 ms; F forward, B backward, I input grad, W weight grad, "
        ". idle)\n");
}

TEST_CASE("format_timeline: one line per rank plus the scale, `width` columns each") {
  const int width = GENERATE(1, 7, 40, 100);
  const Simulation sim = simulate(generate(ScheduleKind::OneFOneB, 12, 16), uniform(1, 2));
  const std::string text = format_timeline(sim, width);
  std::vector<std::string> lines;
  for (size_t begin = 0, end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1)
    lines.push_back(text.substr(begin, end - begin));
  REQUIRE(lines.size() == 13);
  for (size_t r = 0; r < 12; ++r) {
    INFO(lines[r]);
    const std::string label = (r < 10 ? "rank  " : "rank ") + std::to_string(r) + " |";
    CHECK(lines[r].rfind(label, 0) == 0);
    CHECK(lines[r].size() == label.size() + static_cast<size_t>(width) + 1);
    CHECK(lines[r].back() == '|');
  }
  CHECK_THAT(lines[12], ContainsSubstring(" 81 ms"));  // (16 + 12 - 1) * (1 + 2)
}

TEST_CASE("to_chrome_trace: valid JSON, one X event per compute action, one thread per rank") {
  const Simulation sim = simulate(generate(ScheduleKind::OneFOneB, 2, 2), uniform(1, 2));
  const nlohmann::json trace = nlohmann::json::parse(to_chrome_trace(sim));
  REQUIRE(trace.contains("traceEvents"));
  int x_events = 0;
  std::vector<std::string> threads;
  std::string process;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    CHECK(event["pid"] == 0);
    if (event["ph"] == "X") ++x_events;
    if (event["ph"] == "M" && event["name"] == "thread_name")
      threads.push_back(std::to_string(event["tid"].get<int>()) + ":" +
                        event["args"]["name"].get<std::string>());
    if (event["ph"] == "M" && event["name"] == "process_name")
      process = event["args"]["name"].get<std::string>();
    if (event["name"] == "1B0") {  // rank 1 runs 1B0 from 2 ms to 4 ms
      CHECK(event["ph"] == "X");
      CHECK(event["cat"] == "B");
      CHECK(event["ts"].get<double>() == 2000.0);
      CHECK(event["dur"].get<double>() == 2000.0);
      CHECK(event["tid"] == 1);
      CHECK(event["args"]["stage"] == 1);
      CHECK(event["args"]["microbatch"] == 0);
    }
  }
  CHECK(x_events == 8);
  CHECK(threads == std::vector<std::string>{"0:rank 0", "1:rank 1"});
  CHECK(process == "ppctl plan (simulated)");
}

TEST_CASE("ZB-H1 (F=I=W=1, B=2): a third of 1F1B's bubble when m >= p") {
  // Zero Bubble (arXiv 2401.10241 §3): each rank idles (p-1)(F + I - W) = p-1 under ZB-H1, against
  // (p-1)(F + B) = 3(p-1) under 1F1B, within 1F1B's peak activation memory: p on any rank (later
  // ranks defer W and so hold up to p as well, where 1F1B's rank r holds p - r).
  const int64_t p = GENERATE(2, 3, 4, 8);
  const int64_t m = GENERATE_COPY(p, p + 1, 2 * p, 64);
  INFO("p=" << p << " m=" << m);
  const CostModel costs = uniform(1, 2);  // I = W = 1
  const Simulation zb = simulate(generate({ScheduleKind::ZBH1, p, 1, m, 0}), costs);
  const Simulation flush = simulate(generate({ScheduleKind::OneFOneB, p, 1, m, 0}), costs);
  CHECK(zb.step_time == static_cast<double>(3 * m + p - 1));
  CHECK_THAT(zb.mean_bubble_fraction,
             WithinAbs(static_cast<double>(p - 1) / static_cast<double>(3 * m + p - 1), 1e-12));
  for (size_t r = 0; r < static_cast<size_t>(p); ++r) {
    INFO("rank " << r);
    CHECK(zb.busy_time[r] == static_cast<double>(3 * m));
    const double zb_idle = zb.step_time - zb.busy_time[r];
    const double flush_idle = flush.step_time - flush.busy_time[r];
    CHECK_THAT(zb_idle * 3, WithinAbs(flush_idle, 1e-9));
    CHECK(zb.peak_activations[r] <= p);
  }
  CHECK(zb.peak_activations[0] == p);
  if (m == 64)
    CHECK_THAT(zb.mean_bubble_fraction / flush.mean_bubble_fraction, WithinAbs(1.0 / 3, 0.03));
}

TEST_CASE("interleaved 1F1B (v=2): the bubble shrinks to about 1F1B's divided by v") {
  // Megatron-LM (arXiv 2104.04473 §2.2): with v stages per rank the bubble is (p-1)(F+B) against
  // v m (F+B) of work per rank (each virtual stage costs F+B here), so the bubble fraction is
  // (p-1)/(v m + p - 1), against (p-1)/(m + p - 1) for 1F1B: about 1/v of it when m >> p.
  const int64_t v = 2;
  const int64_t p = GENERATE(2, 4, 8);
  const int64_t m = GENERATE_COPY(p, 2 * p, 8 * p);
  INFO("p=" << p << " m=" << m);
  const Simulation sim =
      simulate(generate({ScheduleKind::Interleaved1F1B, p, v, m, 0}), uniform(1, 2));
  CHECK(sim.step_time == static_cast<double>(3 * (v * m + p - 1)));
  const double bubble = static_cast<double>(p - 1) / static_cast<double>(v * m + p - 1);
  for (size_t r = 0; r < static_cast<size_t>(p); ++r)
    CHECK_THAT(sim.bubble_fraction[r], WithinAbs(bubble, 1e-12));
  if (m == 8 * p) {
    const double flush = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
    CHECK_THAT(sim.mean_bubble_fraction * v / flush, WithinAbs(1.0, 0.1));
  }
}
