// zb-auto: the rule that places each rank's W given 1F1B's order of F and I (place_w, a list scheduler
// that times the actions as it places them), and the search over such rules that keeps the fastest
// simulated program within the in-flight limits.
#include "schedule/zb_auto.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <utility>

#include "core/check.hpp"
#include "schedule/generators.hpp"

namespace ppctl::schedule {
namespace {

using config::ScheduleKind;

/// The time of an event that has not happened yet; real times are >= 0.
constexpr double kNotYet = -1.0;
/// End of a waiter list.
constexpr int64_t kNone = -1;
/// Compute actions placed and simulated by one search, in all, before its coordinate rounds stop.
constexpr int64_t kWorkBudget = 3'000'000;

/// Entry `s` of a per-stage list, or its only entry.
double entry(const std::vector<double>& values, int64_t s) {
  return values[values.size() == 1 ? 0 : static_cast<size_t>(s)];
}

/// One cost list of pipeline.zb_auto: 1 or p entries, each finite and >= 0.
void check_list(const std::vector<double>& values, const char* key, int64_t p) {
  PPCTL_CHECK(values.size() == 1 || static_cast<int64_t>(values.size()) == p, ScheduleError,
              fmt::format("zb-auto: pipeline.zb_auto.{} has {} entries for {} stages", key, values.size(), p),
              fmt::format("give one number for every stage, or {} (one per stage, in stage order)", p));
  for (size_t k = 0; k < values.size(); ++k)
    PPCTL_CHECK(std::isfinite(values[k]) && values[k] >= 0.0, ScheduleError,
                fmt::format("zb-auto: pipeline.zb_auto.{}[{}] is {}", key, k, values[k]),
                "give costs as finite, non-negative milliseconds");
}

/// One rank's state while place_w builds its actions.
struct RankState {
  std::vector<Action> order;    ///< 1F1B's F and I of the rank, in order
  size_t next = 0;              ///< index in `order` of the next F or I
  std::deque<int64_t> pending;  ///< microbatches whose I ran and whose W did not, oldest first
  double free_at = 0.0;         ///< when the rank's last action ends, ms
  int64_t held = 0;             ///< microbatches in flight: F run minus W run
  std::optional<Action> last;   ///< the rank's last compute action
  int64_t next_waiter = kNone;  ///< the next rank waiting for the event this one waits for
};

/// place_w's list scheduler: every rank runs its F and I in 1F1B's order, each starting when the rank is
/// free and its input has arrived (the simulator's rules: simulate.hpp), and decides before each one
/// which pending W to run first (WPlacement). A rank that waits for an event not yet timed stops until
/// it is; as 1F1B's order of F and I completes, so does this.
class WPlacer {
 public:
  WPlacer(const ScheduleParams& params, const CostModel& costs, const std::vector<int64_t>& limit,
          const WPlacement& placement)
      : p_(params.ranks),
        m_(params.microbatches),
        costs_(costs),
        limit_(limit),
        placement_(placement),
        program_(detail::empty_program(params, plan::Placement::Loop)),
        time_(static_cast<size_t>(2 * p_ * m_), kNotYet),
        waiters_(static_cast<size_t>(2 * p_ * m_), kNone),
        ranks_(static_cast<size_t>(p_)) {
    for (int64_t r = 0; r < p_; ++r) {
      auto& order = ranks_[static_cast<size_t>(r)].order;
      order.reserve(static_cast<size_t>(2 * m_));
      detail::three_phases(
          m_, detail::warmup(params, r), [&](int64_t j) { order.push_back({ActionKind::F, r, j}); },
          [&](int64_t j) { order.push_back({ActionKind::I, r, j}); });
      program_.ranks[static_cast<size_t>(r)].reserve(static_cast<size_t>(3 * m_));
    }
  }

  Program run() {
    std::vector<int64_t> ready;
    for (int64_t r = p_; r-- > 0;) ready.push_back(r);
    while (!ready.empty()) {
      const int64_t r = ready.back();
      ready.pop_back();
      advance(r, ready);
    }
    for (int64_t r = 0; r < p_; ++r)
      PPCTL_ASSERT(program_.ranks[static_cast<size_t>(r)].size() == static_cast<size_t>(3 * m_),
                   fmt::format("zb-auto: rank {} placed {} of {} actions", r,
                               program_.ranks[static_cast<size_t>(r)].size(), 3 * m_));
    return std::move(program_);
  }

 private:
  size_t event(bool forward, int64_t stage, int64_t microbatch) const {
    return static_cast<size_t>(((forward ? 0 : p_) + stage) * m_ + microbatch);
  }

  /// What the oldest pending W of rank `r` costs now: W, plus defer_penalty unless it follows its I.
  double w_cost(int64_t r) const {
    const RankState& st = ranks_[static_cast<size_t>(r)];
    const StageCosts& c = costs_.stages[static_cast<size_t>(r)];
    const bool right_after_i = st.last == Action{ActionKind::I, r, st.pending.front()};
    return c.weight_grad + (right_after_i ? 0.0 : c.defer_penalty);
  }

  void run_w(int64_t r) {
    RankState& st = ranks_[static_cast<size_t>(r)];
    st.free_at += w_cost(r);
    const Action w{ActionKind::W, r, st.pending.front()};
    st.pending.pop_front();
    --st.held;
    st.last = w;
    program_.ranks[static_cast<size_t>(r)].push_back(w);
  }

  /// Places rank `r`'s actions until it ends or waits for an event not yet timed; the ranks its events
  /// wake go onto `ready`.
  void advance(int64_t r, std::vector<int64_t>& ready) {
    RankState& st = ranks_[static_cast<size_t>(r)];
    const StageCosts& c = costs_.stages[static_cast<size_t>(r)];
    const int64_t lag = placement_.lag[static_cast<size_t>(r)];
    const int64_t defer_from = placement_.defer_from[static_cast<size_t>(r)];
    for (; st.next < st.order.size(); ++st.next) {
      const Action a = st.order[st.next];
      while (!st.pending.empty() && ((a.kind == ActionKind::F && st.held >= limit_[static_cast<size_t>(r)]) ||
                                     static_cast<int64_t>(st.pending.size()) > lag ||
                                     st.pending.front() < defer_from))
        run_w(r);
      // The input: F(s-1,j) for F (none on stage 0); I(s+1,j) for I, or F(s,j) on the last stage.
      double arrives = 0.0;
      const bool last_stage_i = a.kind == ActionKind::I && r == p_ - 1;
      if (!(a.kind == ActionKind::F && r == 0)) {
        const bool forward = a.kind == ActionKind::F || last_stage_i;
        const int64_t from = a.kind == ActionKind::F ? r - 1 : last_stage_i ? r : r + 1;
        const size_t e = event(forward, from, a.microbatch);
        if (time_[e] == kNotYet) {
          st.next_waiter = waiters_[e];
          waiters_[e] = r;
          return;
        }
        arrives = time_[e] + (from != r ? costs_.p2p_latency : 0.0);
      }
      while (!st.pending.empty() && std::isfinite(placement_.fill) && arrives > st.free_at &&
             arrives - st.free_at >= placement_.fill * w_cost(r))
        run_w(r);
      const double end = std::max(st.free_at, arrives) + (a.kind == ActionKind::F ? c.forward : c.input_grad);
      st.free_at = end;
      st.last = a;
      program_.ranks[static_cast<size_t>(r)].push_back(a);
      if (a.kind == ActionKind::F) {
        ++st.held;
      } else {
        st.pending.push_back(a.microbatch);
      }
      const size_t e = event(a.kind == ActionKind::F, r, a.microbatch);
      time_[e] = end;
      for (int64_t w = waiters_[e]; w != kNone; w = ranks_[static_cast<size_t>(w)].next_waiter) ready.push_back(w);
      waiters_[e] = kNone;
    }
    while (!st.pending.empty()) run_w(r);
  }

  int64_t p_;
  int64_t m_;
  const CostModel& costs_;
  const std::vector<int64_t>& limit_;
  const WPlacement& placement_;
  Program program_;
  std::vector<double> time_;       ///< per event (F done, I done of each stage and microbatch), ms
  std::vector<int64_t> waiters_;   ///< per event, the first rank waiting for it
  std::vector<RankState> ranks_;
};

/// Per rank, the W not right after their own I.
std::vector<int64_t> deferred_w(const Program& program) {
  std::vector<int64_t> counts;
  for (const RankProgram& actions : program.ranks) {
    int64_t n = 0;
    const Action* previous = nullptr;
    for (const Action& a : actions) {
      if (!is_compute(a.kind)) continue;
      if (a.kind == ActionKind::W && !(previous && *previous == Action{ActionKind::I, a.stage, a.microbatch})) ++n;
      previous = &a;
    }
    counts.push_back(n);
  }
  return counts;
}

/// `values` as `a, b, c`, or beyond 16 entries `from x to y` (e.g. lags over 64 ranks).
std::string per_rank(const std::vector<int64_t>& values) {
  if (values.size() <= 16) return fmt::format("{}", fmt::join(values, ", "));
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return fmt::format("from {} to {} over {} ranks", *lo, *hi, values.size());
}

std::string describe(const WPlacement& placement) {
  std::string text = fmt::format("W kept pending after its I up to {} per rank", per_rank(placement.lag));
  if (std::any_of(placement.defer_from.begin(), placement.defer_from.end(), [](int64_t j) { return j > 0; }))
    text += fmt::format(", from microbatch {} on (before: right after its I)", per_rank(placement.defer_from));
  if (std::isfinite(placement.fill))
    text += fmt::format(", and run early into idle gaps of at least {:g} x its cost", placement.fill);
  return text;
}

/// The candidates simulated so far and the fastest of them (the first, on a tie).
class Search {
 public:
  Search(const CostModel& costs, const std::vector<int64_t>& limit) : costs_(costs), limit_(limit) {}

  /// Simulates `program`; keeps it when it is within the limits and strictly faster than the best so far.
  /// Returns the simulation.
  Simulation consider(Program program, const std::string& description) {
    improved_ = false;
    Simulation sim = simulate(program, costs_);
    ++candidates_;
    work_ += 2 * static_cast<int64_t>(sim.timeline.size()) * static_cast<int64_t>(
                                                                    program.num_microbatches) * 3;
    bool fits = true;
    for (size_t r = 0; r < limit_.size(); ++r) fits = fits && sim.peak_activations[r] <= limit_[r];
    if (fits && (!best_ || sim.step_time < best_sim_.step_time)) {
      best_ = std::move(program);
      best_sim_ = sim;
      description_ = description;
      best_placement_.reset();
      improved_ = true;
    }
    return sim;
  }

  /// place_w(placement), considered; true when it became the best.
  bool consider(const ScheduleParams& params, const WPlacement& placement) {
    consider(place_w(params, costs_, limit_, placement), describe(placement));
    if (improved_) best_placement_ = placement;
    return improved_;
  }

  bool over_budget() const { return work_ >= kWorkBudget; }
  int64_t candidates() const { return candidates_; }
  const Program& best() const { return *best_; }
  const Simulation& best_simulation() const { return best_sim_; }
  const std::string& description() const { return description_; }
  /// The placement of the best program, when it came from place_w.
  const std::optional<WPlacement>& best_placement() const { return best_placement_; }

 private:
  const CostModel& costs_;
  const std::vector<int64_t>& limit_;
  std::optional<Program> best_;
  Simulation best_sim_;
  std::string description_;
  std::optional<WPlacement> best_placement_;
  bool improved_ = false;  ///< whether the last program considered became the best
  int64_t candidates_ = 0;
  int64_t work_ = 0;
};

/// Rounds of single changes from `start` (each rank's lag in [0, min(limit, m)] and defer_from in [0, m),
/// then the fill), keeping each that is faster, until a round changes nothing or the budget is spent.
void coordinate_search(const ScheduleParams& params, const std::vector<int64_t>& limit, WPlacement start,
                       Search& search) {
  const double fills[] = {std::numeric_limits<double>::infinity(), 1.0, 0.5, 0.0};
  WPlacement current = std::move(start);
  for (bool improved = true; improved && !search.over_budget();) {
    improved = false;
    for (int64_t r = 0; r < params.ranks && !search.over_budget(); ++r) {
      const int64_t most = std::min(limit[static_cast<size_t>(r)], params.microbatches);
      const auto change = [&](std::vector<int64_t> WPlacement::*field, int64_t value) {
        if (search.over_budget() || (current.*field)[static_cast<size_t>(r)] == value) return;
        WPlacement trial = current;
        (trial.*field)[static_cast<size_t>(r)] = value;
        if (search.consider(params, trial)) {
          current = std::move(trial);
          improved = true;
        }
      };
      for (int64_t lag = 0; lag <= most; ++lag) change(&WPlacement::lag, lag);
      if (current.lag[static_cast<size_t>(r)] == 0) continue;  // defer_from changes nothing then
      for (int64_t from = 0; from < params.microbatches; ++from) change(&WPlacement::defer_from, from);
    }
    for (const double fill : fills) {
      if (search.over_budget() || fill == current.fill) continue;
      WPlacement trial = current;
      trial.fill = fill;
      if (search.consider(params, trial)) {
        current = std::move(trial);
        improved = true;
      }
    }
  }
}

}  // namespace

CostModel zb_auto_cost_model(const ScheduleParams& params) {
  const config::ZbAutoSpec& z = params.zb_auto;
  const int64_t p = params.ranks;
  check_list(z.forward, "f", p);
  check_list(z.input_grad, "i", p);
  check_list(z.weight_grad, "w", p);
  if (!z.backward.empty()) check_list(z.backward, "b", p);
  check_list(z.defer_penalty, "defer_penalty", p);
  PPCTL_CHECK(std::isfinite(z.p2p_latency) && z.p2p_latency >= 0.0, ScheduleError,
              fmt::format("zb-auto: pipeline.zb_auto.p2p_latency is {}", z.p2p_latency),
              "give the latency as finite, non-negative milliseconds");
  PPCTL_CHECK(z.max_in_flight >= 0, ScheduleError,
              fmt::format("zb-auto: pipeline.zb_auto.max_in_flight is {}", z.max_in_flight),
              "give 0 (= pipeline.stages) or a positive number of microbatches");
  CostModel costs;
  costs.stages.clear();
  for (int64_t s = 0; s < p; ++s) {
    const double i = entry(z.input_grad, s);
    const double w = entry(z.weight_grad, s);
    const double b = z.backward.empty() ? i + w : entry(z.backward, s);
    costs.stages.push_back({entry(z.forward, s), b, i, w, entry(z.defer_penalty, s)});
  }
  costs.p2p_latency = z.p2p_latency;
  return costs;
}

std::vector<int64_t> zb_auto_in_flight_limits(const ScheduleParams& params) {
  const int64_t p = params.ranks;
  const int64_t limit = params.zb_auto.max_in_flight > 0 ? params.zb_auto.max_in_flight : p;
  std::vector<int64_t> limits;
  for (int64_t r = 0; r < p; ++r) limits.push_back(std::max(limit, std::min(p - r, params.microbatches)));
  return limits;
}

Program place_w(const ScheduleParams& params, const CostModel& costs, const std::vector<int64_t>& in_flight_limit,
                const WPlacement& placement) {
  const auto p = static_cast<size_t>(params.ranks);
  PPCTL_CHECK(placement.lag.size() == p && placement.defer_from.size() == p && in_flight_limit.size() == p &&
                  costs.stages.size() == p,
              ScheduleError,
              fmt::format("place_w: {} lags, {} defer_from, {} limits and {} stage costs for {} ranks",
                          placement.lag.size(), placement.defer_from.size(), in_flight_limit.size(),
                          costs.stages.size(), p),
              "give one of each per rank");
  return WPlacer(params, costs, in_flight_limit, placement).run();
}

ZbAutoPlan plan_zb_auto(const ScheduleParams& params) {
  check_params(params);
  const int64_t p = params.ranks;
  const int64_t m = params.microbatches;
  ZbAutoPlan plan;
  plan.costs = zb_auto_cost_model(params);
  plan.in_flight_limit = zb_auto_in_flight_limits(params);
  const auto& limit = plan.in_flight_limit;
  Search search(plan.costs, limit);

  const std::vector<int64_t> zeros(static_cast<size_t>(p), 0);
  search.consider(params, WPlacement{zeros, zeros});
  plan.one_f_one_b_step =
      search.consider(generate_compute({ScheduleKind::OneFOneB, p, 1, m, 0}), "1F1B (the backward not split)")
          .step_time;
  const Simulation zb_h1 =
      search.consider(generate_compute({ScheduleKind::ZBH1, p, 1, m, 0}), "ZB-H1's (rank r keeps up to r W pending)");
  plan.zb_h1_step = zb_h1.step_time;
  plan.zb_h1_fits = true;
  for (int64_t r = 0; r < p; ++r)
    plan.zb_h1_fits = plan.zb_h1_fits && zb_h1.peak_activations[static_cast<size_t>(r)] <= limit[static_cast<size_t>(r)];

  // Lags: none, ZB-H1's, the most the limit allows; W into gaps that fit it, half fit it, any gap.
  std::vector<int64_t> zb_h1_lags;
  std::vector<int64_t> most;
  for (int64_t r = 0; r < p; ++r) {
    zb_h1_lags.push_back(std::min(r, limit[static_cast<size_t>(r)]));
    most.push_back(std::min(limit[static_cast<size_t>(r)], m));
  }
  // From microbatch 0, or only the W the cooldown can take: rank r's last p - r I run (1F1B's warmup
  // count plus one), and lag W before them.
  const auto cooldown = [&](const std::vector<int64_t>& lags) {
    std::vector<int64_t> from;
    for (int64_t r = 0; r < p; ++r)
      from.push_back(std::max<int64_t>(0, m - std::min(p - r, m) - lags[static_cast<size_t>(r)]));
    return from;
  };
  // (Lag 0 leaves no W pending to fill a gap with, and ZB-H1's lags from 0 without filling are ZB-H1.)
  for (const double fill : {std::numeric_limits<double>::infinity(), 1.0, 0.5, 0.0})
    for (const std::vector<int64_t>& lags : {zb_h1_lags, most})
      for (const std::vector<int64_t>& from : {cooldown(lags), zeros})
        if (!search.over_budget() && !(std::isinf(fill) && lags == zb_h1_lags && from == zeros))
          search.consider(params, WPlacement{lags, from, fill});
  // From the best placement; when a program of another generator is best, from the place_w equivalent to
  // it (1F1B's is lag 0, ZB-H1's lag r).
  const bool zb_h1_best = plan.zb_h1_fits && search.best_simulation().step_time == plan.zb_h1_step;
  coordinate_search(params, limit,
                    search.best_placement() ? *search.best_placement()
                                            : WPlacement{zb_h1_best ? zb_h1_lags : zeros, zeros},
                    search);

  plan.program = search.best();
  plan.placement = search.description();
  plan.step_time = search.best_simulation().step_time;
  plan.peak_in_flight = search.best_simulation().peak_activations;
  plan.deferred_w = deferred_w(plan.program);
  plan.backward_given = !params.zb_auto.backward.empty();
  plan.backward_split = std::none_of(plan.program.ranks.begin(), plan.program.ranks.end(), [](const RankProgram& r) {
    return std::any_of(r.begin(), r.end(), [](const Action& a) { return a.kind == ActionKind::B; });
  });
  plan.candidates = search.candidates();
  return plan;
}

std::string format_zb_auto(const ZbAutoPlan& plan) {
  const auto& stages = plan.costs.stages;
  std::string costs;
  const bool uniform = std::all_of(stages.begin(), stages.end(), [&](const StageCosts& c) {
    return c.forward == stages[0].forward && c.input_grad == stages[0].input_grad &&
           c.weight_grad == stages[0].weight_grad && c.backward == stages[0].backward &&
           c.defer_penalty == stages[0].defer_penalty;
  });
  // B only when pipeline.zb_auto.b was given (otherwise it is I + W, as the first line says).
  const auto b = [&](const char* prefix, const StageCosts& c) {
    return plan.backward_given ? fmt::format("{}{:g}", prefix, c.backward) : std::string();
  };
  if (uniform) {
    costs = fmt::format("F {:g}, I {:g}, W {:g}{} ms per stage, W deferred +{:g} ms", stages[0].forward,
                        stages[0].input_grad, stages[0].weight_grad, b(", B ", stages[0]), stages[0].defer_penalty);
  } else {
    std::vector<std::string> parts;
    for (size_t s = 0; s < stages.size(); ++s)
      parts.push_back(fmt::format("{}: F {:g} I {:g} W {:g}{} +{:g}", s, stages[s].forward, stages[s].input_grad,
                                  stages[s].weight_grad, b(" B ", stages[s]), stages[s].defer_penalty));
    costs = fmt::format("costs per stage in ms (F, I, W, {}+ when a W is deferred) {}", plan.backward_given ? "B, " : "",
                        fmt::join(parts, "; "));
  }
  std::string out = fmt::format("zb-auto: W placed for {}; p2p {:g} ms (pipeline.zb_auto; not given: F = I = W = 1, "
                                "B (pipeline.zb_auto.b) = I + W, nothing for deferring or sending)\n",
                                costs, plan.costs.p2p_latency);
  out += fmt::format("  in flight (microbatches from F to W, or to B) at most {} per rank (pipeline.zb_auto.max_in_flight; "
                     "0 = pipeline.stages, never below 1F1B's p - rank)\n",
                     per_rank(plan.in_flight_limit));
  out += fmt::format("  chosen of {} placements simulated: {}\n", plan.candidates, plan.placement);
  if (plan.backward_split) {
    out += fmt::format("  W deferred (not right after its I) per rank: {} of {}; peak in flight {}\n",
                       per_rank(plan.deferred_w), plan.program.num_microbatches, per_rank(plan.peak_in_flight));
  } else {
    out += fmt::format("  no W: every backward runs unsplit (B), cheaper here than I then W; peak in flight {}\n",
                       per_rank(plan.peak_in_flight));
  }
  const auto versus = [&](double other) {
    return other > 0.0 ? fmt::format("{:+.1f}%", 100.0 * (plan.step_time - other) / other) : std::string("-");
  };
  out += fmt::format("  simulated step {:g} ms; 1f1b {:g} ms ({} against it); zb-h1 {:g} ms ({} against it{})\n",
                     plan.step_time, plan.one_f_one_b_step, versus(plan.one_f_one_b_step), plan.zb_h1_step,
                     versus(plan.zb_h1_step), plan.zb_h1_fits ? "" : "; over the in-flight limit, not a candidate");
  return out;
}

}  // namespace ppctl::schedule
