// Schedule simulator: longest-path timing of a program's compute actions (one worklist pass) and of
// its gradient reductions, plus its ASCII timeline and Chrome trace renderings.
#include "schedule/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/check.hpp"
#include "schedule/chrome_trace.hpp"
#include "schedule/validate.hpp"

namespace ppctl::schedule {
namespace {

/// The time of an event that has not happened yet; real times are >= 0.
constexpr double kNotYet = -1.0;
/// End of a waiter list.
constexpr int64_t kNone = -1;

/// Checks the cost model against the program: one entry or one per stage; costs finite, >= 0.
void check_costs(const CostModel& costs, int64_t num_stages) {
  const size_t n = costs.stages.size();
  PPCTL_CHECK(
      n == 1 || static_cast<int64_t>(n) == num_stages, ScheduleError,
      fmt::format("simulate: the cost model has {} stage entries for {} stages", n, num_stages),
      "give one StageCosts for every stage, or a single one for all of them");
  const auto check = [](double value, std::string_view what) {
    PPCTL_CHECK(std::isfinite(value) && value >= 0.0, ScheduleError,
                fmt::format("simulate: {} is {}", what, value),
                "give costs and latency as finite, non-negative milliseconds");
  };
  check(costs.p2p_latency, "p2p_latency");
  check(costs.transfer_post, "transfer_post");
  check(costs.grad_reduce, "grad_reduce");
  for (size_t s = 0; s < n; ++s) {
    const StageCosts& c = costs.stages[s];
    check(c.forward, fmt::format("stages[{}].forward", s));
    check(c.backward, fmt::format("stages[{}].backward", s));
    check(c.input_grad, fmt::format("stages[{}].input_grad", s));
    check(c.weight_grad, fmt::format("stages[{}].weight_grad", s));
    check(c.defer_penalty, fmt::format("stages[{}].defer_penalty", s));
  }
}

/// Checks that every compute action names a stage and microbatch of the program, every REDUCE_GRAD a
/// stage, and that each sits on the rank that runs its stage (the simulator indexes arrays by them).
void check_geometry(const Program& program) {
  const int64_t p = program.num_stages;
  PPCTL_CHECK(program.num_microbatches >= 0, ScheduleError,
              fmt::format("simulate: {} microbatches", program.num_microbatches),
              "give a program with num_microbatches >= 0");
  PPCTL_CHECK(static_cast<int64_t>(program.stage_to_rank.size()) == p, ScheduleError,
              fmt::format("simulate: stage_to_rank has {} entries for {} stages",
                          program.stage_to_rank.size(), p),
              "give one rank per stage");
  for (int64_t s = 0; s < p; ++s) {
    const int64_t owner = program.stage_to_rank[static_cast<size_t>(s)];
    PPCTL_CHECK(owner >= 0 && owner < program.num_ranks(), ScheduleError,
                fmt::format("simulate: stage {} is placed on rank {}, but there are {} ranks", s,
                            owner, program.num_ranks()),
                "place every stage on a rank in [0, number of ranks)");
  }
  for (int64_t r = 0; r < program.num_ranks(); ++r)
    for (const Action& a : program.ranks[static_cast<size_t>(r)]) {
      if (!is_compute(a.kind) && !is_reduce(a.kind)) continue;
      PPCTL_CHECK(a.stage >= 0 && a.stage < p && a.microbatch >= 0 &&
                      (a.microbatch < program.num_microbatches || is_reduce(a.kind)),
                  ScheduleError,
                  fmt::format("simulate: {} on rank {} is outside {} stages x {} microbatches",
                              to_string(a), r, p, program.num_microbatches),
                  "use stages in [0, num_stages) and microbatches in [0, num_microbatches)");
      const int64_t owner = program.stage_to_rank[static_cast<size_t>(a.stage)];
      PPCTL_CHECK(owner == r, ScheduleError,
                  fmt::format("simulate: {} is on rank {}, but stage {} runs on rank {}",
                              to_string(a), r, a.stage, owner),
                  "put each stage's actions on the rank stage_to_rank names");
    }
}

/// The event an action waits for, and the events it produces. An event is one of two per
/// (stage, microbatch): "forward done" (F) and "input gradient done" (B or I). W waits for the
/// input-gradient event of its own (stage, microbatch).
struct Dependency {
  bool exists = false;
  bool on_forward = false;  ///< waits for a forward-done event (else an input-gradient-done one)
  int64_t stage = 0;
};

/// What `compute` waits for (see simulate.hpp): F(s-1,j) for F; B/I(s+1,j) for B/I (F(s,j) on the
/// last stage); B/I(s,j) for W; nothing for F(0,j).
Dependency dependency_of(const Action& compute, int64_t num_stages) {
  switch (compute.kind) {
    case ActionKind::F:
      if (compute.stage == 0) return {};
      return {true, true, compute.stage - 1};
    case ActionKind::B:
    case ActionKind::I:
      if (compute.stage == num_stages - 1) return {true, true, compute.stage};
      return {true, false, compute.stage + 1};
    default:  // W
      return {true, false, compute.stage};
  }
}

/// Duration of `compute` under `costs` (already checked); `previous` is the rank's compute action
/// before it (a W right after its own I pays no defer_penalty), null when it is the rank's first.
double cost_of(const Action& compute, const TimedAction* previous, const CostModel& costs) {
  const StageCosts& c =
      costs.stages[costs.stages.size() == 1 ? 0 : static_cast<size_t>(compute.stage)];
  switch (compute.kind) {
    case ActionKind::F:
      return c.forward;
    case ActionKind::B:
      return c.backward;
    case ActionKind::I:
      return c.input_grad;
    default: {
      const bool right_after_i =
          previous != nullptr && previous->action == Action{ActionKind::I, compute.stage, compute.microbatch};
      return c.weight_grad + (right_after_i ? 0.0 : c.defer_penalty);
    }
  }
}

/// The simulator's state: per event its time (kNotYet until it happens) and the ranks waiting for
/// it (an intrusive list: head per event, next per rank, as a rank waits for one event at a time).
class Simulator {
 public:
  Simulator(const Program& program, const CostModel& costs)
      : program_(program),
        costs_(costs),
        num_events_(program.num_stages * program.num_microbatches),
        event_time_(static_cast<size_t>(2 * num_events_), kNotYet),
        waiters_(static_cast<size_t>(2 * num_events_), kNone),
        next_waiter_(static_cast<size_t>(program.num_ranks()), kNone),
        position_(static_cast<size_t>(program.num_ranks()), 0),
        free_at_(static_cast<size_t>(program.num_ranks()), 0.0),
        reduce_free_at_(static_cast<size_t>(program.num_ranks()), 0.0),
        held_(static_cast<size_t>(program.num_ranks()), 0) {}

  /// Runs every rank as far as it goes; throws ScheduleError naming the stuck ranks.
  Simulation run() {
    const size_t ranks = program_.ranks.size();
    result_.timeline.resize(ranks);
    result_.reductions.resize(ranks);
    result_.busy_time.assign(ranks, 0.0);
    result_.peak_activations.assign(ranks, 0);
    for (size_t r = 0; r < ranks; ++r) {
      size_t computes = 0;
      for (const Action& a : program_.ranks[r]) computes += is_compute(a.kind) ? 1 : 0;
      result_.timeline[r].reserve(computes);
    }
    std::vector<int64_t> ready;  // ranks that may be able to advance
    for (size_t r = ranks; r-- > 0;) ready.push_back(static_cast<int64_t>(r));
    while (!ready.empty()) {
      const int64_t rank = ready.back();
      ready.pop_back();
      advance(rank, ready);
    }
    throw_if_stuck();
    finish();
    return std::move(result_);
  }

 private:
  /// Index of the event for (stage, microbatch) of the given type.
  size_t event(bool forward, int64_t stage, int64_t microbatch) const {
    return static_cast<size_t>((forward ? 0 : num_events_) + stage * program_.num_microbatches +
                               microbatch);
  }

  /// Runs `rank`'s actions until it ends or waits for an event that has not happened; events it
  /// produces wake their waiters onto `ready`.
  void advance(int64_t rank, std::vector<int64_t>& ready) {
    const auto r = static_cast<size_t>(rank);
    const RankProgram& actions = program_.ranks[r];
    size_t& pos = position_[r];
    for (; pos < actions.size(); ++pos) {
      const Action& a = actions[pos];
      if (is_reduce(a.kind)) reduce(r, a.stage);
      if (is_send(a.kind) || is_recv(a.kind)) free_at_[r] += costs_.transfer_post;  // posting it, on this thread
      if (!is_compute(a.kind)) continue;  // a transfer's latency is charged to the consumer
      double start = free_at_[r];
      const Dependency dep = dependency_of(a, program_.num_stages);
      if (dep.exists) {
        const size_t e = event(dep.on_forward, dep.stage, a.microbatch);
        if (event_time_[e] == kNotYet) {
          next_waiter_[r] = waiters_[e];
          waiters_[e] = rank;
          return;
        }
        const bool remote = program_.stage_to_rank[static_cast<size_t>(dep.stage)] != rank;
        start = std::max(start, event_time_[e] + (remote ? costs_.p2p_latency : 0.0));
      }
      const auto& done = result_.timeline[r];
      const double end = start + cost_of(a, done.empty() ? nullptr : &done.back(), costs_);
      free_at_[r] = end;
      result_.timeline[r].push_back({a, start, end});
      result_.busy_time[r] += end - start;
      count_activation(r, a.kind);
      if (a.kind != ActionKind::W) {
        const size_t e = event(a.kind == ActionKind::F, a.stage, a.microbatch);
        event_time_[e] = end;
        for (int64_t w = waiters_[e]; w != kNone; w = next_waiter_[static_cast<size_t>(w)])
          ready.push_back(w);
        waiters_[e] = kNone;
      }
    }
  }

  /// Starts `stage`'s gradient reduction on `rank` when the rank's compute so far and its previous
  /// reduction are done; it does not occupy the compute.
  void reduce(size_t rank, int64_t stage) {
    const double start = std::max(free_at_[rank], reduce_free_at_[rank]);
    reduce_free_at_[rank] = start + costs_.grad_reduce;
    result_.reductions[rank].push_back({stage, start, reduce_free_at_[rank]});
  }

  /// Reduces, after each rank's last action, the stages the program holds no REDUCE_GRAD for.
  void reduce_the_rest() {
    std::vector<char> reduced(static_cast<size_t>(program_.num_stages), 0);
    for (const auto& rank : result_.reductions)
      for (const TimedReduction& t : rank) reduced[static_cast<size_t>(t.stage)] = 1;
    for (int64_t s = 0; s < program_.num_stages; ++s)
      if (!reduced[static_cast<size_t>(s)])
        reduce(static_cast<size_t>(program_.stage_to_rank[static_cast<size_t>(s)]), s);
  }

  /// Activations held: +1 at F; -1 at B or W (I keeps them: W still needs them).
  void count_activation(size_t rank, ActionKind kind) {
    if (kind == ActionKind::F) {
      result_.peak_activations[rank] = std::max(result_.peak_activations[rank], ++held_[rank]);
    } else if (kind == ActionKind::B || kind == ActionKind::W) {
      --held_[rank];
    }
  }

  /// Throws ScheduleError when some rank did not reach its end: a deadlock. Each stuck rank stands
  /// at a compute action whose dependency never happened.
  void throw_if_stuck() const {
    std::string stuck;
    std::vector<size_t> positions(program_.ranks.size(), kUnmarked);
    for (size_t r = 0; r < program_.ranks.size(); ++r) {
      if (position_[r] == program_.ranks[r].size()) continue;
      const Action& a = program_.ranks[r][position_[r]];
      const Dependency dep = dependency_of(a, program_.num_stages);
      const std::string awaited =
          dep.on_forward
              ? to_string(Action{ActionKind::F, dep.stage, a.microbatch})
              : fmt::format("{} or {}", to_string(Action{ActionKind::B, dep.stage, a.microbatch}),
                            to_string(Action{ActionKind::I, dep.stage, a.microbatch}));
      stuck += fmt::format("{}rank {} at {} waits for {}", stuck.empty() ? "" : "; ", r,
                           to_string(a), awaited);
      positions[r] = position_[r];
    }
    if (stuck.empty()) return;
    throw ScheduleError(fmt::format(
        "simulate: the program cannot complete (deadlock): {} (each awaited action is missing or "
        "comes after a stuck one on its rank)\n{}",
        stuck, format_grid(program_, positions)));
  }

  /// The reductions left for after the schedule, then step time (each rank's last compute or
  /// reduction) and bubble fractions from the per-rank busy times.
  void finish() {
    reduce_the_rest();
    for (size_t r = 0; r < program_.ranks.size(); ++r)
      result_.step_time = std::max({result_.step_time, free_at_[r], reduce_free_at_[r]});
    result_.bubble_fraction.reserve(program_.ranks.size());
    double sum = 0.0;
    for (double busy : result_.busy_time) {
      const double bubble = result_.step_time > 0.0 ? 1.0 - busy / result_.step_time : 0.0;
      result_.bubble_fraction.push_back(bubble);
      sum += bubble;
    }
    if (!program_.ranks.empty()) result_.mean_bubble_fraction = sum / program_.ranks.size();
  }

  const Program& program_;
  const CostModel& costs_;
  int64_t num_events_;
  std::vector<double> event_time_;
  std::vector<int64_t> waiters_;
  std::vector<int64_t> next_waiter_;
  std::vector<size_t> position_;  ///< per rank, index in its action list of the next action
  std::vector<double> free_at_;   ///< per rank, when its last compute action ended
  std::vector<double> reduce_free_at_;  ///< per rank, when its last gradient reduction ends
  std::vector<int64_t> held_;     ///< per rank, activations held now
  Simulation result_;
};

/// The character shown for a compute kind in the ASCII timeline.
char symbol(ActionKind kind) { return to_string(kind)[0]; }

/// One timeline bar of `width` columns of `column` ms: each shows the symbol of the interval of
/// `intervals` (sorted, not overlapping, with .start and .end in ms) running at its midpoint, else '.'.
template <typename Interval, typename Symbol>
std::string timeline_bar(const std::vector<Interval>& intervals, int width, double column,
                         const Symbol& symbol_of) {
  std::string bar(static_cast<size_t>(width), '.');
  size_t i = 0;
  for (int c = 0; c < width && i < intervals.size(); ++c) {
    const double t = (c + 0.5) * column;
    while (i < intervals.size() && intervals[i].end <= t) ++i;
    if (i < intervals.size() && intervals[i].start <= t)
      bar[static_cast<size_t>(c)] = symbol_of(intervals[i]);
  }
  return bar;
}

/// Whether any reduction lasts longer than 0 ms (grad_reduce was modelled).
bool shows_reductions(const Simulation& simulation) {
  for (const auto& rank : simulation.reductions)
    for (const TimedReduction& t : rank)
      if (t.end > t.start) return true;
  return false;
}

}  // namespace

Simulation simulate(const Program& program, const CostModel& costs) {
  check_costs(costs, program.num_stages);
  check_geometry(program);
  return Simulator(program, costs).run();
}

/// Column c covers [c, c+1) * step / width and shows what runs at its midpoint: an action lasting
/// at least one column always shows, and a rank's non-idle columns approximate its busy time.
std::string format_timeline(const Simulation& simulation, int width) {
  PPCTL_ASSERT(width >= 1, fmt::format("format_timeline: width {} < 1", width));
  const size_t ranks = simulation.timeline.size();
  const int digits = static_cast<int>(fmt::format("{}", ranks ? ranks - 1 : 0).size());
  const int label_width = 5 + digits;  // "rank " and the rank, right-aligned
  const double column = simulation.step_time / width;
  const bool reductions = shows_reductions(simulation);
  const auto compute = [](const TimedAction& t) { return symbol(t.action.kind); };
  std::string out;
  for (size_t r = 0; r < ranks; ++r) {
    out += fmt::format("rank {:>{}} |{}|\n", r, digits,
                       timeline_bar(simulation.timeline[r], width, column, compute));
    if (reductions && r < simulation.reductions.size())
      out += fmt::format("{:{}} |{}|\n", "", label_width,
                         timeline_bar(simulation.reductions[r], width, column,
                                      [](const TimedReduction&) { return 'R'; }));
  }
  // Scale: "0" under the first column, the step time ending under the last one.
  const std::string right = fmt::format("{:g} ms", simulation.step_time);
  const int gap = std::max(1, width - 1 - static_cast<int>(right.size()));
  out += fmt::format(
      "{:{}}0{:{}}{}  (1 column = {:g} ms; F forward, B backward, I input grad, "
      "W weight grad, . idle{})\n",
      "", label_width + 2, "", gap, right, column,
      reductions ? "; R gradient reduction, on the line under its rank" : "");
  return out;
}

std::string to_chrome_trace(const Simulation& simulation) {
  using nlohmann::json;
  // Whole nanoseconds: a slice that starts where another ends gets the same one (chrome_trace_us).
  const auto ns = [](double ms) { return static_cast<int64_t>(std::llround(ms * 1e6)); };
  json events = json::array();
  events.push_back(chrome_process_name("ppctl plan (simulated)"));
  const auto ranks = static_cast<int64_t>(simulation.timeline.size());
  for (int64_t r = 0; r < ranks; ++r) events.push_back(chrome_track_name(r));
  const bool reductions = shows_reductions(simulation);
  for (int64_t r = 0; reductions && r < ranks; ++r)
    events.push_back(chrome_named_track(ranks + r, fmt::format("rank {} collectives", r)));
  for (size_t r = 0; r < simulation.timeline.size(); ++r)
    for (const TimedAction& t : simulation.timeline[r])
      events.push_back(
          {{"name", to_string(t.action)},
           {"cat", to_string(t.action.kind)},
           {"ph", "X"},
           {"ts", chrome_trace_us(ns(t.start))},
           {"dur", chrome_trace_us(ns(t.end) - ns(t.start))},
           {"pid", 0},
           {"tid", r},
           {"args", {{"stage", t.action.stage}, {"microbatch", t.action.microbatch}}}});
  for (size_t r = 0; reductions && r < simulation.reductions.size(); ++r)
    for (const TimedReduction& t : simulation.reductions[r])
      events.push_back({{"name", to_string(Action{ActionKind::REDUCE_GRAD, t.stage, 0})},
                        {"cat", to_string(ActionKind::REDUCE_GRAD)},
                        {"ph", "X"},
                        {"ts", chrome_trace_us(ns(t.start))},
                        {"dur", chrome_trace_us(ns(t.end) - ns(t.start))},
                        {"pid", 0},
                        {"tid", ranks + static_cast<int64_t>(r)},
                        {"args", {{"stage", t.stage}}}});
  return json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace ppctl::schedule
