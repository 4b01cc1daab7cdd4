// The `ppctl plan --tune` search: enumerate, check by the spec's rules, bound, simulate, estimate, rank.
#include "tune/search.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "plan/balance.hpp"
#include "plan/tensor_parallel.hpp"
#include "schedule/job_program.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/split_time.hpp"

namespace ppctl::tune {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
/// zb-auto is placed only while p x m stays at or below this: its search simulates about 3 million
/// actions at larger sizes (schedule/zb_auto.hpp), seconds per candidate.
constexpr int64_t kZbAutoMaxCells = 131072;
/// Candidates simulated only to rank the spec's own configuration, at most.
constexpr int64_t kRankOnlyBudget = 200;

/// A candidate checked and costed, waiting to be simulated.
struct Prepared {
  Knobs knobs;
  std::vector<Change> changes;
  config::JobSpec spec;
  std::shared_ptr<const schedule::Program> program;
  plan::Layout layout;
  schedule::CostModel costs;
  double bound = 0.0;   ///< lower_bound + offset: no simulated step of it ranks lower
  int64_t order = 0;
  double offset = 0.0;  ///< Calibration::at(its compute actions), added to its simulated step
};

/// Counts of the candidates left out, by reason.
class Tally {
 public:
  void add(const std::string& reason, int64_t count = 1) {
    if (count > 0) counts_[reason] += count;
  }
  std::vector<std::pair<std::string, int64_t>> sorted() const {
    std::vector<std::pair<std::string, int64_t>> out(counts_.begin(), counts_.end());
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    return out;
  }

 private:
  std::map<std::string, int64_t> counts_;
};

std::vector<plan::LayerRange> split_of(const plan::Layout& layout) {
  std::vector<plan::LayerRange> split;
  for (const auto& stage : layout.stages) split.push_back(stage.layers);
  return split;
}

std::string counts_text(const std::vector<plan::LayerRange>& split) {
  std::vector<int64_t> counts;
  for (const auto& range : split) counts.push_back(range.size());
  return fmt::format("[{}]", fmt::join(counts, ", "));
}

bool same_split(const std::vector<plan::LayerRange>& a, const std::vector<plan::LayerRange>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].begin != b[i].begin || a[i].end != b[i].end) return false;
  return true;
}

/// `changes` without any change of `path`.
void drop(std::vector<Change>& changes, const std::string& path) {
  changes.erase(std::remove_if(changes.begin(), changes.end(), [&](const Change& c) { return c.path == path; }),
                changes.end());
}

/// `changes` with the split given explicitly: pipeline.balance uniform and pipeline.layers_per_stage `split`.
void set_split(std::vector<Change>& changes, const std::vector<plan::LayerRange>& split) {
  drop(changes, "pipeline.layers_per_stage");
  for (size_t i = 0; i < changes.size(); ++i) {
    if (changes[i].path != "pipeline.balance") continue;
    changes[i].yaml = "uniform";
    changes.insert(changes.begin() + static_cast<std::ptrdiff_t>(i) + 1, {"pipeline.layers_per_stage", counts_text(split)});
    return;
  }
}

/// A step as ranked: steps equal to 1e-6 tie (the simulator sums the same costs in another order for another
/// schedule), and then go to the smaller peak memory and the earlier candidate.
double tied_step(double step) { return std::round(step * 1e6); }

/// One number for a list whose entries are all equal, else the YAML list.
std::string cost_list(const std::vector<double>& values) {
  if (std::all_of(values.begin(), values.end(), [&](double v) { return v == values.front(); }))
    return fmt::format("{:.6g}", values.front());
  std::vector<std::string> items;
  for (double v : values) items.push_back(fmt::format("{:.6g}", v));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

/// The cost model of a candidate `spec` laid out as `layout`: candidate_times at its micro batch size (against
/// the searched spec's `spec_mbs`) and its tensor-parallel size (against the spec's `spec_tp`: each rank computes
/// 1/tp of a layer, so the times are scaled by spec_tp / tp) with its tp collectives (tp_all_reduce_cost), the
/// options' latency, reduction, defer penalty and transfer posting.
schedule::CostModel candidate_costs(const TuneOptions& options, int64_t spec_mbs, int64_t spec_tp,
                                    const config::JobSpec& spec, const plan::Layout& layout) {
  auto times = candidate_times(options, spec.pipeline.micro_batch_size, spec_mbs);
  const int64_t tp = std::max<int64_t>(spec.pipeline.tensor_parallel, 1);
  if (tp != spec_tp) times = scaled(times, static_cast<double>(spec_tp) / static_cast<double>(tp));
  auto costs = schedule::job_cost_model(spec, layout, times, options.p2p_latency, options.grad_reduce);
  schedule::add_tp_collectives(costs, spec, layout, {tp_all_reduce_cost(options, spec_mbs, spec_tp, spec)});
  for (auto& stage : costs.stages) stage.defer_penalty = options.defer_penalty;
  costs.transfer_post = options.transfer_post;
  return costs;
}

/// The search's state: the spec, its editor, the caches and the tally.
class Search {
 public:
  Search(const config::JobSpec& spec, const std::string& text, const std::string& base_dir, const TuneOptions& options,
         const Calibration& calibration)
      : spec_(spec), editor_(text, base_dir), options_(options), calibration_(calibration) {}

  TuneResult run(const plan::Layout& own_layout, const schedule::Program& own_program);

 private:
  void enumerate();
  void prepare(const Knobs& knobs, int64_t order);
  std::shared_ptr<const schedule::Program> program_of(const config::JobSpec& spec, const Knobs& knobs);
  schedule::CostModel costs_of(const config::JobSpec& spec, const plan::Layout& layout) const;
  /// Calibration::at(compute_actions(program)); 0 without a calibration (the actions are not counted then).
  double offset_of(const schedule::Program& program) const {
    return calibration_.calibrated() ? calibration_.at(compute_actions(program)) : 0.0;
  }
  std::optional<Evaluated> evaluate(const Prepared& candidate, double kth, double own_step);
  void place_zb_auto(const std::vector<Evaluated>& top);
  std::vector<Evaluated> best() const;

  const config::JobSpec& spec_;
  SpecEditor editor_;
  const TuneOptions& options_;
  const Calibration& calibration_;
  std::map<std::string, std::shared_ptr<const schedule::Program>> programs_;
  std::map<std::string, std::string> program_errors_;
  std::map<std::shared_ptr<const schedule::Program>, schedule::ReleasePoints> released_;  // per program, once
  std::map<std::string, plan::Layout> layouts_;  // per schedule, v, m and split
  std::vector<Prepared> prepared_;
  std::vector<Evaluated> ranked_;
  /// (tp, m, split, recompute) -> the order of its zb-h1 candidate
  std::map<std::tuple<int64_t, int64_t, Split, config::Recompute>, int64_t> zb_auto_combos_;
  Tally tally_;
  int64_t candidates_ = 0;
  int64_t simulated_ = 0;
  double own_step_ = 0.0;  // the spec's own simulated step (-infinity when it is not ranked)
};

std::shared_ptr<const schedule::Program> Search::program_of(const config::JobSpec& spec, const Knobs& knobs) {
  const std::string key = fmt::format("{}/{}/{}", config::to_string(knobs.kind), knobs.virtual_stages, knobs.microbatches);
  if (const auto it = programs_.find(key); it != programs_.end()) return it->second;
  if (const auto it = program_errors_.find(key); it != program_errors_.end()) throw ScheduleError(it->second);
  try {
    auto program = std::make_shared<const schedule::Program>(schedule::job_program(spec));
    programs_[key] = program;
    return program;
  } catch (const ScheduleError& e) {
    program_errors_[key] = e.what();
    throw;
  }
}

schedule::CostModel Search::costs_of(const config::JobSpec& spec, const plan::Layout& layout) const {
  return candidate_costs(options_, spec_.pipeline.micro_batch_size, std::max<int64_t>(spec_.pipeline.tensor_parallel, 1),
                         spec, layout);
}

void Search::prepare(const Knobs& knobs, int64_t order) {
  ++candidates_;
  if (options_.affine && !searched(*options_.affine, knobs.micro_batch_size)) {
    tally_.add(fmt::format("micro_batch_size outside {}-{} (the probed {}-{}, with a margin of x{}; a probe at it "
                           "brings it in)",
                           (options_.affine->low_mbs + kSearchMargin - 1) / kSearchMargin,
                           options_.affine->high_mbs * kSearchMargin, options_.affine->low_mbs,
                           options_.affine->high_mbs, kSearchMargin));
    return;
  }
  Prepared candidate{knobs, changes_of(knobs, spec_), {}, nullptr, {}, {}, 0.0, order};
  try {
    candidate.spec = editor_.apply(candidate.changes);
    candidate.program = program_of(candidate.spec, knobs);
    if (knobs.split == Split::Measured) {
      const auto times = candidate_times(options_, knobs.micro_batch_size, spec_.pipeline.micro_batch_size);
      const auto split = schedule::balance_by_times(candidate.spec, *candidate.program, times);
      set_split(candidate.changes, split);
      candidate.spec = editor_.apply(candidate.changes);
    }
    // The layout depends on the schedule, v, m and the split, not on recompute: laid out once for the three.
    const std::string key = fmt::format("{}/{}/{}/{}/{}", config::to_string(knobs.kind), knobs.virtual_stages,
                                        knobs.microbatches, to_string(knobs.split), knobs.tensor_parallel);
    auto layout = layouts_.find(key);
    if (layout == layouts_.end())
      layout = layouts_.emplace(key, schedule::job_layout(candidate.spec, *candidate.program)).first;
    candidate.layout = layout->second;
  } catch (const Error& e) {
    tally_.add(refusal_reason(e));
    return;
  }
  // The same blocks on the same stages as an earlier split of this schedule, m and recompute: one candidate.
  for (auto it = prepared_.rbegin(); it != prepared_.rend() && it->program == candidate.program; ++it) {
    if (it->knobs.recompute == knobs.recompute && it->knobs.tensor_parallel == knobs.tensor_parallel &&
        same_split(split_of(it->layout), split_of(candidate.layout))) {
      tally_.add(fmt::format("duplicate: the {} split equals the {} split", to_string(knobs.split),
                             to_string(it->knobs.split)));
      return;
    }
  }
  if (knobs.kind == config::ScheduleKind::ZBH1)
    zb_auto_combos_[{knobs.tensor_parallel, knobs.microbatches, knobs.split, knobs.recompute}] = order;
  candidate.costs = costs_of(candidate.spec, candidate.layout);
  candidate.offset = offset_of(*candidate.program);
  candidate.bound = lower_bound(*candidate.program, candidate.costs) + candidate.offset;
  prepared_.push_back(std::move(candidate));
}

void Search::enumerate() {
  using config::ScheduleKind;
  const std::pair<ScheduleKind, int64_t> kinds[] = {
      {ScheduleKind::GPipe, 1},           {ScheduleKind::OneFOneB, 1},        {ScheduleKind::Interleaved1F1B, 2},
      {ScheduleKind::Interleaved1F1B, 3}, {ScheduleKind::Interleaved1F1B, 4}, {ScheduleKind::ZBH1, 1},
      {ScheduleKind::ZBV, 2}};
  std::vector<Split> splits{Split::Uniform, Split::Auto};
  if (options_.measured) splits.push_back(Split::Measured);
  const config::Recompute modes[] = {config::Recompute::None, config::Recompute::Full, config::Recompute::Blocks};
  const int64_t batch = spec_.pipeline.microbatches * spec_.pipeline.micro_batch_size;
  const int64_t spec_tp = std::max<int64_t>(spec_.pipeline.tensor_parallel, 1);
  const int64_t spec_dp = std::max<int64_t>(spec_.pipeline.data_parallel, 1);
  int64_t order = 0;
  // The spec's tp first; another tp takes its ranks from dp, and each replica then runs tp / spec_tp times the
  // sequences, so that the ranks and the global batch stay the spec's.
  for (const int64_t tp : tensor_parallel_candidates(spec_)) {
    const int64_t replica_batch = batch * tp / spec_tp;
    const int64_t knob_tp = tp == spec_tp ? 0 : tp, knob_dp = tp == spec_tp ? 0 : spec_dp * spec_tp / tp;
    for (const auto& [kind, v] : kinds)
      for (const int64_t m : divisors(replica_batch))
        for (const auto recompute : modes)
          for (const auto split : splits)
            prepare({kind, v, m, replica_batch / m, split, recompute, knob_tp, knob_dp}, order++);
  }
}

std::optional<Evaluated> Search::evaluate(const Prepared& candidate, double kth, double own_step) {
  ++simulated_;
  const auto simulation = schedule::simulate(*candidate.program, candidate.costs);
  Evaluated out{candidate.knobs,
                candidate.changes,
                candidate.bound,
                simulation.step_time + candidate.offset,
                simulation.step_time,
                simulation.mean_bubble_fraction,
                0,
                0,
                "",
                candidate.order};
  // Slower than the list's slowest and than the spec's own: it can neither be listed nor change the own
  // configuration's rank, so its memory is not estimated (the costly part at scale).
  if (tied_step(out.step) > tied_step(kth) && out.step >= own_step) {
    tally_.add(fmt::format("simulated, slower than the top {} and the spec's own (memory not estimated)", options_.top));
    return std::nullopt;
  }
  auto released = released_.find(candidate.program);
  if (released == released_.end())
    released = released_.emplace(candidate.program, schedule::release_points(*candidate.program)).first;
  const auto peak_of = [&](const config::JobSpec& spec) {
    const auto ranks = schedule::estimate_memory(spec, candidate.layout, *candidate.program, released->second);
    const auto most = std::max_element(ranks.begin(), ranks.end(),
                                       [](const auto& a, const auto& b) { return a.total() < b.total(); });
    return std::make_pair(most->total(), most->rank);
  };
  std::tie(out.peak_bytes, out.peak_rank) = peak_of(candidate.spec);
  const auto fits = [&](int64_t bytes) { return options_.memory_gib <= 0 || bytes / kGiB <= options_.memory_gib; };
  if (fits(out.peak_bytes)) return out;
  // Memory levers: settings whose effect on the step the cost model does not predict.
  std::vector<std::vector<Change>> levers;
  const bool can_distribute = !candidate.spec.optimizer.distributed && candidate.layout.data_parallel > 1;
  const bool can_bf16_params = candidate.spec.runtime.precision != config::Precision::Bf16Params;
  if (can_distribute) levers.push_back({{"optimizer.distributed", "true"}});
  if (can_bf16_params) levers.push_back({{"runtime.precision", "bf16-params"}});
  if (can_distribute && can_bf16_params)
    levers.push_back({{"runtime.precision", "bf16-params"}, {"optimizer.distributed", "true"}});
  if (candidate.spec.runtime.precision == config::Precision::Fp32) levers.push_back({{"runtime.precision", "bf16"}});
  for (const auto& lever : levers) {
    auto changes = candidate.changes;
    changes.insert(changes.end(), lever.begin(), lever.end());
    try {
      const auto spec = editor_.apply(changes);
      const auto [bytes, rank] = peak_of(spec);
      if (!fits(bytes)) continue;
      std::vector<std::string> named;
      for (const auto& change : lever) named.push_back(fmt::format("{}: {}", change.path, change.yaml));
      out.changes = std::move(changes);
      out.lever = fmt::format("{}", fmt::join(named, ", "));
      out.peak_bytes = bytes;
      out.peak_rank = rank;
      return out;
    } catch (const ConfigError&) {
      continue;  // the lever breaks a rule for this spec (e.g. bf16-params on this device)
    }
  }
  tally_.add(fmt::format("does not fit {:g} GiB per rank ({}), nor with the memory levers the spec allows",
                         options_.memory_gib, options_.memory_source));
  return std::nullopt;
}

std::vector<Evaluated> Search::best() const {
  auto all = ranked_;
  const auto key = [](const Evaluated& e) { return std::make_tuple(tied_step(e.step), e.peak_bytes, e.order); };
  std::sort(all.begin(), all.end(), [&](const Evaluated& a, const Evaluated& b) { return key(a) < key(b); });
  if (static_cast<int64_t>(all.size()) > options_.top) all.resize(static_cast<size_t>(options_.top));
  return all;
}

void Search::place_zb_auto(const std::vector<Evaluated>& top) {
  std::set<std::tuple<int64_t, int64_t, Split, config::Recompute>> placed;
  const int64_t p = spec_.pipeline.stages;
  int64_t order = static_cast<int64_t>(candidates_) + 1'000'000;
  for (const auto& entry : top) {
    const auto& k = entry.knobs;
    if (k.kind != config::ScheduleKind::ZBH1 && k.kind != config::ScheduleKind::OneFOneB) continue;
    const auto combo = std::make_tuple(k.tensor_parallel, k.microbatches, k.split, k.recompute);
    if (!zb_auto_combos_.count(combo) || !placed.insert(combo).second) continue;
    ++candidates_;
    if (p * k.microbatches > kZbAutoMaxCells) {
      tally_.add(fmt::format("zb-auto not placed: p x m above {} (its search takes seconds there; `ppctl plan` "
                             "with schedule zb-auto shows it)", kZbAutoMaxCells));
      continue;
    }
    // The split and the stage costs of this combination's zb-h1 candidate (the same stage placement).
    const auto source = std::find_if(prepared_.begin(), prepared_.end(), [&](const Prepared& c) {
      return c.order == zb_auto_combos_.at(combo);
    });
    Knobs knobs{config::ScheduleKind::ZBAuto, 1, k.microbatches, k.micro_batch_size, k.split, k.recompute,
                k.tensor_parallel, k.data_parallel};
    auto changes = changes_of(knobs, spec_);
    std::vector<double> f, i, w, b;
    for (const auto& stage : source->costs.stages) {
      f.push_back(stage.forward);
      i.push_back(stage.input_grad);
      w.push_back(stage.weight_grad);
      b.push_back(stage.backward);  // B unsplit, for zb-auto's 1F1B candidate (often below I + W when measured)
    }
    set_split(changes, split_of(source->layout));
    const int64_t limit = spec_.pipeline.schedule == config::ScheduleKind::ZBAuto ? spec_.pipeline.zb_auto.max_in_flight : 0;
    drop(changes, "pipeline.zb_auto");
    changes.push_back({"pipeline.zb_auto",
                       fmt::format("{{f: {}, i: {}, w: {}, b: {}, defer_penalty: {:.6g}, p2p_latency: {:.6g}, "
                                   "max_in_flight: {}}}",
                                   cost_list(f), cost_list(i), cost_list(w), cost_list(b), options_.defer_penalty,
                                   options_.p2p_latency, limit)});
    Prepared candidate{knobs, changes, {}, nullptr, {}, {}, 0.0, order++};
    try {
      candidate.spec = editor_.apply(candidate.changes);
      candidate.program = std::make_shared<const schedule::Program>(schedule::job_program(candidate.spec));
      candidate.layout = schedule::job_layout(candidate.spec, *candidate.program);
    } catch (const Error& e) {
      tally_.add(refusal_reason(e));
      continue;
    }
    candidate.costs = costs_of(candidate.spec, candidate.layout);
    candidate.offset = offset_of(*candidate.program);
    candidate.bound = lower_bound(*candidate.program, candidate.costs) + candidate.offset;
    const auto top_now = best();
    const double kth = static_cast<int64_t>(top_now.size()) < options_.top ? std::numeric_limits<double>::infinity()
                                                                            : top_now.back().step;
    auto evaluated = evaluate(candidate, kth, own_step_);
    if (!evaluated) continue;
    if (tied_step(evaluated->step) >= tied_step(entry.step)) {  // listing it would repeat the entry's step
      tally_.add("zb-auto placed, no faster than the 1f1b or zb-h1 of its m, split and recompute");
      continue;
    }
    ranked_.push_back(std::move(*evaluated));
  }
  const auto others = static_cast<int64_t>(zb_auto_combos_.size()) - static_cast<int64_t>(placed.size());
  candidates_ += others;
  tally_.add(fmt::format("zb-auto not placed: its m, split and recompute have no 1f1b or zb-h1 in the top {} "
                         "(zb-auto's step is at most theirs; placing W is the costly part)",
                         options_.top),
             others);
}

TuneResult Search::run(const plan::Layout& own_layout, const schedule::Program& own_program) {
  TuneResult result;
  if (spec_.pipeline.schedule == config::ScheduleKind::Custom) {
    result.own.why_not = "a custom schedule (pipeline.schedule_file) is not among the candidates";
  } else {
    result.own.ranked = true;
    const auto costs = costs_of(spec_, own_layout);
    const auto simulation = schedule::simulate(own_program, costs);
    result.own.simulated = simulation.step_time;
    result.own.step = simulation.step_time + offset_of(own_program);
    result.own.bubble = simulation.mean_bubble_fraction;
    for (const auto& r : schedule::estimate_memory(spec_, own_layout, own_program))
      result.own.peak_bytes = std::max(result.own.peak_bytes, r.total());
    result.own.fits = options_.memory_gib <= 0 || result.own.peak_bytes / kGiB <= options_.memory_gib;
  }
  enumerate();
  std::stable_sort(prepared_.begin(), prepared_.end(),
                   [](const Prepared& a, const Prepared& b) { return std::tie(a.bound, a.order) < std::tie(b.bound, b.order); });
  const double inf = std::numeric_limits<double>::infinity();
  const double own_step = result.own.ranked ? result.own.step : -inf;
  own_step_ = own_step;
  int64_t pruned = 0;
  int64_t rank_only = 0;
  for (const auto& candidate : prepared_) {
    const auto top = best();
    const double kth = static_cast<int64_t>(top.size()) < options_.top ? inf : top.back().step;
    const bool for_top = candidate.bound <= kth;
    const bool for_rank = candidate.bound < own_step && rank_only < kRankOnlyBudget;
    if (!for_top && !for_rank) {
      ++pruned;
      continue;
    }
    if (!for_top) ++rank_only;
    if (auto evaluated = evaluate(candidate, kth, own_step)) ranked_.push_back(std::move(*evaluated));
  }
  tally_.add(fmt::format("not simulated: lower bound above the top {}'s slowest step (and the spec's own)", options_.top),
             pruned);
  place_zb_auto(best());
  result.top = best();
  result.candidates = candidates_;
  result.simulated = simulated_;
  result.ranked = static_cast<int64_t>(ranked_.size());
  result.ruled_out = tally_.sorted();
  if (result.own.ranked) {
    result.own.rank = 1 + std::count_if(ranked_.begin(), ranked_.end(),
                                        [&](const Evaluated& e) { return e.step < result.own.step; });
  }
  return result;
}

}  // namespace

double lower_bound(const schedule::Program& program, const schedule::CostModel& costs) {
  const auto cost = [&](int64_t s) -> const schedule::StageCosts& {
    return costs.stages.size() == 1 ? costs.stages.front() : costs.stages[static_cast<size_t>(s)];
  };
  const auto backward = [&](int64_t s) { return std::min(cost(s).backward, cost(s).input_grad); };
  const int64_t stages = program.num_stages;
  const auto m = static_cast<double>(program.num_microbatches);
  std::vector<double> forward_before(static_cast<size_t>(stages) + 1, 0.0);   // sum of F of stages < s
  std::vector<double> backward_before(static_cast<size_t>(stages) + 1, 0.0);  // sum of min(B, I) of stages < s
  for (int64_t s = 0; s < stages; ++s) {
    forward_before[static_cast<size_t>(s) + 1] = forward_before[static_cast<size_t>(s)] + cost(s).forward;
    backward_before[static_cast<size_t>(s) + 1] = backward_before[static_cast<size_t>(s)] + backward(s);
  }
  std::vector<double> busy(static_cast<size_t>(program.num_ranks()), 0.0);
  std::vector<double> start(busy.size(), std::numeric_limits<double>::infinity());
  for (int64_t s = 0; s < stages; ++s) {
    const auto& c = cost(s);
    const auto r = static_cast<size_t>(program.stage_to_rank[static_cast<size_t>(s)]);
    busy[r] += m * (c.forward + std::min(c.backward, c.input_grad + c.weight_grad));
    start[r] = std::min(start[r], forward_before[static_cast<size_t>(s)]);
  }
  double bound = 0.0;
  for (size_t r = 0; r < busy.size(); ++r) {
    if (busy[r] <= 0.0) continue;
    // What must still run, one action after another, once the rank's last compute action has ended: the
    // backward of its microbatch down to stage 0 (after a B or I), or the rest of its forward and the whole
    // backward (after an F); nothing after a W.
    double tail = 0.0;
    const auto& actions = program.ranks[r];
    for (auto it = actions.rbegin(); it != actions.rend(); ++it) {
      const auto kind = it->kind;
      if (kind == schedule::ActionKind::W) break;
      if (kind == schedule::ActionKind::B || kind == schedule::ActionKind::I) {
        tail = backward_before[static_cast<size_t>(it->stage)];
        break;
      }
      if (kind == schedule::ActionKind::F) {
        tail = forward_before[static_cast<size_t>(stages)] - forward_before[static_cast<size_t>(it->stage) + 1] +
               backward_before[static_cast<size_t>(stages)];
        break;
      }
    }
    bound = std::max(bound, start[r] + busy[r] + tail);
  }
  return bound;
}

std::vector<int64_t> tensor_parallel_candidates(const config::JobSpec& spec) {
  const int64_t spec_tp = std::max<int64_t>(spec.pipeline.tensor_parallel, 1);
  std::vector<int64_t> out{spec_tp};
  if (spec.pipeline.data_parallel < 1) return out;  // dp derived at launch: nothing to trade
  const int64_t ranks = spec_tp * spec.pipeline.data_parallel;  // tp x dp, kept
  for (const int64_t tp : plan::tensor_parallel_sizes(spec.model, kMostTensorParallel)) {
    if (tp != spec_tp && tp % spec_tp == 0 && ranks % tp == 0) out.push_back(tp);
  }
  return out;
}

double tp_all_reduce_cost(const TuneOptions& options, int64_t spec_mbs, int64_t spec_tp,
                          const config::JobSpec& candidate) {
  const int64_t tp = std::max<int64_t>(candidate.pipeline.tensor_parallel, 1);
  const double ms = plan::tp_all_reduce_ms(candidate, options.tp_comm);
  if (!options.measured) {
    auto unit = candidate;  // the FLOP model's unit: one block's forward at the spec's micro batch size and tp
    unit.pipeline.micro_batch_size = spec_mbs;
    unit.pipeline.tensor_parallel = spec_tp;
    return ms / plan::forward_ms(unit, plan::block_forward_flops(unit.model), options.tp_comm);
  }
  if (options.tp_comm.collective_ms) return ms;
  auto at_spec_tp = candidate;
  at_spec_tp.pipeline.tensor_parallel = spec_tp;
  const double held = static_cast<double>(spec_tp) / static_cast<double>(tp) *
                      plan::tp_all_reduce_ms(at_spec_tp, options.tp_comm);
  return std::max(0.0, ms - held);
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

plan::LayerTimes scaled(const plan::LayerTimes& times, double factor) {
  auto out = times;
  const auto scale = [factor](plan::PieceTime& t) {
    t.forward_ms *= factor;
    t.backward_ms *= factor;
  };
  for (auto& block : out.blocks) scale(block);
  scale(out.embedding);
  scale(out.head);
  return out;
}

plan::LayerTimes candidate_times(const TuneOptions& options, int64_t mbs, int64_t spec_mbs) {
  if (options.affine) return times_at(*options.affine, mbs);
  return scaled(options.times, static_cast<double>(mbs) / static_cast<double>(spec_mbs));
}

int64_t compute_actions(const schedule::Program& program) {
  int64_t most = 0;
  for (const auto& rank : program.ranks)
    most = std::max<int64_t>(most, std::count_if(rank.begin(), rank.end(),
                                                 [](const schedule::Action& a) { return schedule::is_compute(a.kind); }));
  return most;
}

Calibration calibrate(const config::JobSpec& spec, const TuneOptions& options) {
  Calibration out;
  out.skipped = options.uncalibrated;
  for (const auto& probe : options.probe_runs) {
    const int64_t mbs = probe.spec.pipeline.micro_batch_size;
    if (options.affine && !searched(*options.affine, mbs)) {
      out.skipped.push_back(fmt::format("{}: micro_batch_size {} is not costed by the search", probe.source, mbs));
      continue;
    }
    try {
      const auto program = schedule::job_program(probe.spec);
      const auto layout = schedule::job_layout(probe.spec, program);
      const auto costs = candidate_costs(options, spec.pipeline.micro_batch_size,
                                         std::max<int64_t>(spec.pipeline.tensor_parallel, 1), probe.spec, layout);
      const double simulated = schedule::simulate(program, costs).step_time;
      // Measured under half or over ten times the simulated step: the run's metrics.jsonl and trace.json
      // cannot both be right (a loaded 2-core machine measured up to 1.8 times: docs/benchmarks.md).
      if (!(probe.measured_ms >= 0.5 * simulated && probe.measured_ms <= 10.0 * simulated)) {
        out.skipped.push_back(fmt::format("{}: its measured step {:.4g} ms is not within 0.5-10 x its simulated {:.4g} "
                                          "ms (its metrics.jsonl and trace.json disagree)",
                                          probe.source, probe.measured_ms, simulated));
        continue;
      }
      out.probes.push_back({probe.source, mbs, compute_actions(program), probe.measured_ms, simulated});
    } catch (const Error& e) {
      out.skipped.push_back(fmt::format("{}: its configuration cannot be simulated again: {}", probe.source, e.what()));
    }
  }
  if (out.probes.empty()) return out;
  double mean = 0.0;
  for (const auto& check : out.probes) mean += (check.measured - check.simulated) / static_cast<double>(out.probes.size());
  out.fixed_ms = mean;
  if (out.probes.size() != 2 || out.probes[0].actions == out.probes[1].actions) return out;
  const auto& a = out.probes[0];
  const auto& b = out.probes[1];
  const double slope = ((a.measured - a.simulated) - (b.measured - b.simulated)) /
                       static_cast<double>(a.actions - b.actions);
  if (slope < 0.0) {
    out.clamped = fmt::format("the probe with more actions left less unexplained (a slope of {:.4g} per action), so "
                              "the per-action part is taken as 0 and the fixed part as the mean",
                              slope);
    return out;
  }
  out.per_action_ms = slope;
  out.fixed_ms = (a.measured - a.simulated) - slope * static_cast<double>(a.actions);
  out.least_actions = std::min(a.actions, b.actions);
  return out;
}

TuneResult tune(const config::JobSpec& spec, const std::string& spec_text, const std::string& base_dir,
                const plan::Layout& layout, const schedule::Program& program, const TuneOptions& options) {
  const auto calibration = calibrate(spec, options);
  Search search(spec, spec_text, base_dir, options, calibration);
  auto result = search.run(layout, program);
  result.calibration = calibration;
  return result;
}

}  // namespace ppctl::tune
