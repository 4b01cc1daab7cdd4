// Benchmark: wall time of generate, add_communication, validate and simulate for every generated
// schedule kind at p = 64 stages, m = 256 microbatches, and of planning a 1,024-rank job
// (p = 64 x dp = 16). Prints two tables; see scripts/bench/simulate_scale.sh.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schedule/generate.hpp"
#include "schedule/simulate.hpp"
#include "schedule/validate.hpp"

namespace {

using ppctl::config::ScheduleKind;
using ppctl::schedule::CostModel;
using ppctl::schedule::Program;
using ppctl::schedule::ScheduleParams;
using ppctl::schedule::Simulation;
using ppctl::schedule::StageCosts;

constexpr int64_t kStages = 64;         ///< p
constexpr int64_t kMicrobatches = 256;  ///< m
constexpr int64_t kDataParallel = 16;   ///< dp: 64 x 16 = 1,024 ranks
constexpr int kRepeats = 5;             ///< each time is the median of this many runs
constexpr double kTargetMs = 1000.0;    ///< the 1,024-rank plan must take under a second

/// One schedule to measure.
struct Case {
  const char* name;
  ScheduleParams params;
};

/// Median over kRepeats runs of `run`'s wall time, in ms.
double median_ms(const std::function<void()>& run) {
  std::vector<double> times;
  for (int i = 0; i < kRepeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    times.push_back(elapsed.count());
  }
  std::nth_element(times.begin(), times.begin() + kRepeats / 2, times.end());
  return times[kRepeats / 2];
}

/// The first line of an exception's message (error messages may append a whole action grid).
std::string first_line(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

/// Number of actions over all ranks.
size_t count_actions(const Program& program) {
  size_t n = 0;
  for (const auto& rank : program.ranks) n += rank.size();
  return n;
}

/// Timings of one schedule at p = 64, m = 256; validate_ms is empty when validate() rejected it.
struct Phases {
  size_t actions = 0;
  double generate_ms = 0;
  double communication_ms = 0;
  std::optional<double> validate_ms;
  double simulate_ms = 0;
  Program program;  ///< with communication
  Simulation simulation;

  /// generate + add_communication + validate: what a job does once, whatever its dp.
  double plan_ms() const { return generate_ms + communication_ms + validate_ms.value_or(0.0); }
};

/// Measures each phase of `c` separately (each the median of kRepeats runs). Adds a note when
/// validate() rejects the program; the simulation still runs. Throws what generate throws.
Phases measure(const Case& c, const CostModel& costs, std::vector<std::string>& notes) {
  Phases out;
  Program compute = ppctl::schedule::generate_compute(c.params);
  out.generate_ms = median_ms([&] { compute = ppctl::schedule::generate_compute(c.params); });
  Program& program = out.program;
  out.communication_ms = median_ms([&] { program = ppctl::schedule::add_communication(compute); });
  out.actions = count_actions(program);
  try {
    ppctl::schedule::validate(program);
    out.validate_ms = median_ms([&] { ppctl::schedule::validate(program); });
  } catch (const std::exception& e) {
    notes.push_back(fmt::format("{}: validate rejected the program: {}", c.name, first_line(e)));
  }
  out.simulate_ms = median_ms([&] { out.simulation = ppctl::schedule::simulate(program, costs); });
  return out;
}

/// Wall time of simulating every dp replica of the 1,024-rank job: each runs the identical
/// program, so it is simulated kDataParallel times. Median of kRepeats runs.
double simulate_replicas_ms(const Program& program, const CostModel& costs) {
  return median_ms([&] {
    for (int64_t replica = 0; replica < kDataParallel; ++replica)
      (void)ppctl::schedule::simulate(program, costs);
  });
}

}  // namespace

int main() {
  const std::vector<Case> cases = {
      {"gpipe", {ScheduleKind::GPipe, kStages, 1, kMicrobatches, 0}},
      {"1f1b", {ScheduleKind::OneFOneB, kStages, 1, kMicrobatches, 0}},
      {"interleaved-1f1b v=2", {ScheduleKind::Interleaved1F1B, kStages, 2, kMicrobatches, 0}},
      {"zb-h1", {ScheduleKind::ZBH1, kStages, 1, kMicrobatches, 0}},
      {"zbv", {ScheduleKind::ZBV, kStages, 2, kMicrobatches, 0}},
  };
  CostModel costs;
  costs.stages = {StageCosts{1.0, 2.0, 1.0, 1.0}};  // F=1 ms, B=2 ms, I=W=1 ms

  std::vector<std::string> notes;
  fmt::print(
      "p = {} ranks (v stages each), m = {} microbatches; costs F=1 B=2 I=1 W=1 ms, no p2p "
      "latency.\n",
      kStages, kMicrobatches);
  fmt::print("Each time is the median of {} runs, in ms.\n\n", kRepeats);
  fmt::print("{:<22} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11} {:>7}\n", "schedule",
             "actions", "generate", "add_comm", "validate", "simulate", "total", "step (sim)",
             "bubble");
  std::vector<std::pair<const char*, Phases>> measured;  // the cases that generate
  for (const Case& c : cases) {
    Phases phases;
    try {
      phases = measure(c, costs, notes);
    } catch (const std::exception& e) {
      notes.push_back(fmt::format("{}: skipped, generate threw: {}", c.name, first_line(e)));
      fmt::print("{:<22} {:>8}\n", c.name, "skipped");
      continue;
    }
    const double total = phases.plan_ms() + phases.simulate_ms;
    fmt::print("{:<22} {:>8} {:>10.2f} {:>10.2f} {:>10} {:>10.2f} {:>10.2f} {:>8.0f} ms {:>7.4f}\n",
               c.name, phases.actions, phases.generate_ms, phases.communication_ms,
               phases.validate_ms ? fmt::format("{:.2f}", *phases.validate_ms) : "rejected",
               phases.simulate_ms, total, phases.simulation.step_time,
               phases.simulation.mean_bubble_fraction);
    measured.emplace_back(c.name, std::move(phases));
  }

  fmt::print(
      "\n1,024 ranks = p {} x dp {}. The {} data-parallel replicas run the identical {}-rank\n"
      "program: it is generated, given communication and validated once (times above), then\n"
      "simulated {} times, once per replica. Target: total < {:.0f} ms.\n\n",
      kStages, kDataParallel, kDataParallel, kStages, kDataParallel, kTargetMs);
  fmt::print("{:<22} {:>10} {:>14} {:>10} {:>7}\n", "schedule", "plan once", "simulate x16",
             "total", "< 1 s");
  for (const auto& [name, phases] : measured) {
    const double replicas = simulate_replicas_ms(phases.program, costs);
    const double total = phases.plan_ms() + replicas;
    fmt::print("{:<22} {:>10.2f} {:>14.2f} {:>10.2f} {:>7}\n", name, phases.plan_ms(), replicas,
               total, total < kTargetMs ? "yes" : "NO");
  }
  if (!notes.empty()) fmt::print("\nNotes:\n");
  for (const std::string& note : notes) fmt::print("- {}\n", note);
  return 0;
}
