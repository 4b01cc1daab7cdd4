// Schedule parameters and their rules, the dispatch to the per-kind generators (gen_*.cpp, zb_auto.cpp), the
// pass that inserts SEND/RECV actions and the one that inserts REDUCE_GRAD actions.
#include "schedule/generate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "core/check.hpp"
#include "schedule/generators.hpp"
#include "schedule/zb_auto.hpp"

namespace ppctl::schedule {
namespace {

using config::ScheduleKind;

/// At least one stage (rank) and one microbatch.
void check_geometry(int64_t stages, int64_t microbatches) {
  PPCTL_CHECK(
      stages >= 1, ScheduleError,
      fmt::format("cannot build a schedule for {} stages: a pipeline needs at least 1 stage",
                  stages),
      "set pipeline.stages >= 1");
  PPCTL_CHECK(microbatches >= 1, ScheduleError,
              fmt::format("cannot build a schedule for {} microbatches: a step needs at least 1",
                          microbatches),
              "set pipeline.microbatches >= 1");
}

/// The stages per rank each generated kind runs: exactly 1 or 2, or (interleaved) at least 2.
void check_virtual_stages(const ScheduleParams& params) {
  const std::string name = config::to_string(params.kind);
  const int64_t v = params.virtual_stages;
  switch (params.kind) {
    case ScheduleKind::ZBV:
      PPCTL_CHECK(v == 2, ScheduleError,
                  fmt::format("zbv places exactly 2 stages on each rank (a V), but "
                              "pipeline.virtual_stages is {}",
                              v),
                  "set pipeline.virtual_stages: 2");
      return;
    case ScheduleKind::Interleaved1F1B:
      PPCTL_CHECK(v >= 2, ScheduleError,
                  fmt::format("interleaved-1f1b needs at least 2 stages per rank, but "
                              "pipeline.virtual_stages is {}",
                              v),
                  "set pipeline.virtual_stages: 2 or more, or use schedule 1f1b");
      return;
    default:
      PPCTL_CHECK(
          v == 1, ScheduleError,
          fmt::format("{} runs one stage per rank, but pipeline.virtual_stages is {}", name, v),
          "set pipeline.virtual_stages: 1, or use schedule interleaved-1f1b for several "
          "stages per rank");
  }
}

/// The interleaved-1f1b group rule (see check_params).
bool full_enough_groups(int64_t p, int64_t m, int64_t g) {
  return g >= p && (m <= g || m % g == 0 || m % g >= p);
}

/// The nearest `x` below and above `from` (within [lo, hi]) with ok(x), as "a or b" / "a" / "b".
template <typename Ok>
std::string nearest(int64_t from, int64_t lo, int64_t hi, const Ok& ok) {
  std::optional<int64_t> below;
  std::optional<int64_t> above;
  for (int64_t x = from - 1; x >= lo && !below; --x)
    if (ok(x)) below = x;
  for (int64_t x = from + 1; x <= hi && !above; ++x)
    if (ok(x)) above = x;
  if (below && above) return fmt::format("{} or {}", *below, *above);
  return fmt::format("{}", below ? *below : above.value_or(lo));
}

/// Groups of g microbatches visit the chunks in turn (Megatron-core get_schedule_table). A rank
/// starts chunk c + 1 of a microbatch g forwards after chunk c of it; the microbatch must have come
/// round the other p - 1 ranks by then, so g >= p, and the last group needs the same slack unless
/// it is the only one or full. check_params's grid test shows the rule is sufficient.
void check_groups(const ScheduleParams& params) {
  const int64_t p = params.ranks;
  const int64_t m = params.microbatches;
  PPCTL_CHECK(params.group_size >= 0, ScheduleError,
              fmt::format("interleaved-1f1b: pipeline.microbatch_group_size is {}, below 0",
                          params.group_size),
              "set pipeline.microbatch_group_size to 0 (= pipeline.stages) or more");
  const int64_t g = group_size(params);
  const std::string g_text =
      params.group_size == 0
          ? fmt::format("{} (pipeline.microbatch_group_size 0 = pipeline.stages)", g)
          : fmt::format("{} (pipeline.microbatch_group_size)", g);
  PPCTL_CHECK(g >= p, ScheduleError,
              fmt::format("interleaved-1f1b: microbatch groups of {} are smaller than "
                          "pipeline.stages ({}): each group must hold at least one microbatch per "
                          "rank, or the ranks can wait on each other forever",
                          g_text, p),
              fmt::format("set pipeline.microbatch_group_size to {} or more, or 0", p));
  PPCTL_CHECK(
      full_enough_groups(p, m, g), ScheduleError,
      fmt::format("interleaved-1f1b: pipeline.microbatches {} in groups of {} leaves a last "
                  "group of {}, fewer than pipeline.stages ({}): the last group must be "
                  "full or hold at least one microbatch per rank, or the schedule can "
                  "deadlock",
                  m, g_text, m % g, p),
      fmt::format("use pipeline.microbatches {}, or pipeline.microbatch_group_size {}",
                  nearest(m, 1, m + g, [&](int64_t x) { return full_enough_groups(p, x, g); }),
                  nearest(g, p, m, [&](int64_t x) { return full_enough_groups(p, m, x); })));
}

}  // namespace

ScheduleParams schedule_params(const config::JobSpec& spec) {
  return {spec.pipeline.schedule, spec.pipeline.stages, spec.pipeline.virtual_stages,
          spec.pipeline.microbatches, spec.pipeline.microbatch_group_size, spec.pipeline.zb_auto};
}

int64_t group_size(const ScheduleParams& params) {
  return params.group_size == 0 ? params.ranks : params.group_size;
}

void check_params(const ScheduleParams& params) {
  PPCTL_CHECK(params.kind != ScheduleKind::Custom, ScheduleError,
              "schedule custom is read from pipeline.schedule_file, not generated",
              "read it with schedule::read_csv");
  check_geometry(params.ranks, params.microbatches);
  check_virtual_stages(params);
  if (params.kind == ScheduleKind::Interleaved1F1B) check_groups(params);
  if (params.kind == ScheduleKind::ZBAuto) zb_auto_cost_model(params);  // throws for bad costs
}

/// GPipe (Huang et al., arXiv 1811.06965 §2.3) runs every forward before any backward: warmup = m.
/// 1F1B as in Megatron-LM's forward_backward_pipelining_without_interleaving (Narayanan et al.,
/// arXiv 2104.04473 §2.2): rank r runs min(p - r - 1, m) forwards before its steady phase, so the
/// last rank starts its first backward right after its first forward; ZB-H1 keeps that order. The
/// interleaved and ZBV counts are those of the loops in gen_1f1b.cpp and gen_zbv.cpp.
int64_t warmup_microbatches(const ScheduleParams& params, int64_t rank) {
  check_params(params);
  PPCTL_CHECK(rank >= 0 && rank < params.ranks, ScheduleError,
              fmt::format("{} warmup: rank {} is outside [0, {}) for {} ranks",
                          config::to_string(params.kind), rank, params.ranks, params.ranks),
              "pass a rank in [0, pipeline.stages)");
  return detail::warmup(params, rank);
}

int64_t detail::warmup(const ScheduleParams& params, int64_t rank) {
  const int64_t p = params.ranks;
  const int64_t m = params.microbatches;
  switch (params.kind) {
    case ScheduleKind::GPipe:
      return m;
    case ScheduleKind::Interleaved1F1B:
      return std::min(2 * (p - rank - 1) + (params.virtual_stages - 1) * group_size(params),
                      m * params.virtual_stages);
    case ScheduleKind::ZBV:
      return std::min(2 * p - rank - 1, m) + std::min(rank, m);
    default:  // 1F1B, ZB-H1, zb-auto
      return std::min(p - rank - 1, m);
  }
}

int64_t warmup_microbatches(config::ScheduleKind kind, int64_t stages, int64_t microbatches,
                            int64_t rank) {
  PPCTL_CHECK(
      kind == ScheduleKind::GPipe || kind == ScheduleKind::OneFOneB || kind == ScheduleKind::ZBH1 ||
          kind == ScheduleKind::ZBAuto,
      ScheduleError,
      fmt::format("warmup_microbatches(kind, stages, ...) covers schedules with one stage "
                  "per rank, not {}",
                  config::to_string(kind)),
      "call warmup_microbatches(schedule_params(spec), rank)");
  return warmup_microbatches({kind, stages, 1, microbatches, 0}, rank);
}

Program generate_compute(const ScheduleParams& params) {
  check_params(params);
  switch (params.kind) {
    case ScheduleKind::Interleaved1F1B:
      return detail::interleaved_1f1b(params);
    case ScheduleKind::ZBV:
      return detail::zbv(params);
    case ScheduleKind::ZBAuto:
      return plan_zb_auto(params).program;
    default:  // GPipe, 1F1B, ZB-H1 (custom is rejected by check_params)
      return detail::flush_schedule(params);
  }
}

Program generate_compute(config::ScheduleKind kind, int64_t stages, int64_t microbatches) {
  return generate_compute({kind, stages, 1, microbatches, 0});
}

/// Output per rank, for its compute actions c0, c1, ...:
///   RECV(c0) RECV(c1) c0 SEND(c0) RECV(c2) c1 SEND(c1) RECV(c3) c2 SEND(c2) ...
/// where RECV(c)/SEND(c) are input_transfer/output_transfer (absent when the neighbouring stage is
/// on the same rank or does not exist, and for W). Posting each receive one compute action early
/// lets the transfer overlap that compute; sends are issued as soon as their tensor exists
/// (non-blocking, see DESIGN.md: a blocking Gloo send deadlocks 1F1B). Tags (message_tag) are
/// unique per (receiving stage, microbatch, direction), so two ranks that are each other's next and
/// previous peer (p = 2 with virtual stages) never confuse their transfers.
Program add_communication(const Program& compute_only) {
  PPCTL_CHECK(static_cast<int64_t>(compute_only.stage_to_rank.size()) == compute_only.num_stages,
              ScheduleError,
              fmt::format("add_communication: stage_to_rank has {} entries for {} stages",
                          compute_only.stage_to_rank.size(), compute_only.num_stages),
              "give one rank per stage");
  Program out = compute_only;
  for (size_t rank = 0; rank < compute_only.ranks.size(); ++rank) {
    const RankProgram& compute = compute_only.ranks[rank];
    for (const Action& action : compute)
      PPCTL_CHECK(is_compute(action.kind), ScheduleError,
                  fmt::format("add_communication: rank {} already holds communication action {}",
                              rank, to_string(action)),
                  "pass the compute-only program (generate_compute), not one with SEND/RECV");
    RankProgram& actions = out.ranks[rank];
    actions.clear();
    const auto post_recv = [&](size_t i) {
      if (i >= compute.size()) return;
      if (auto recv = input_transfer(compute[i], compute_only)) actions.push_back(*recv);
    };
    post_recv(0);
    for (size_t i = 0; i < compute.size(); ++i) {
      post_recv(i + 1);
      actions.push_back(compute[i]);
      if (auto send = output_transfer(compute[i], compute_only)) actions.push_back(*send);
    }
  }
  return out;
}

Program generate(const ScheduleParams& params) {
  return add_communication(generate_compute(params));
}

Program generate(config::ScheduleKind kind, int64_t stages, int64_t microbatches) {
  return add_communication(generate_compute(kind, stages, microbatches));
}

/// Per rank, finds each of its stages' last backward (B, I or W), moves past a SEND_B of the same
/// (stage, microbatch) right after it, and inserts REDUCE_GRAD(s) there: O(actions).
Program add_gradient_reduction(const Program& with_communication) {
  const Program& in = with_communication;
  PPCTL_CHECK(static_cast<int64_t>(in.stage_to_rank.size()) == in.num_stages, ScheduleError,
              fmt::format("add_gradient_reduction: stage_to_rank has {} entries for {} stages",
                          in.stage_to_rank.size(), in.num_stages),
              "give one rank per stage");
  // last[s]: index in its rank's program after which REDUCE_GRAD(s) goes.
  std::vector<std::optional<size_t>> last(static_cast<size_t>(in.num_stages));
  for (size_t rank = 0; rank < in.ranks.size(); ++rank) {
    const RankProgram& actions = in.ranks[rank];
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      PPCTL_CHECK(!is_reduce(a.kind), ScheduleError,
                  fmt::format("add_gradient_reduction: rank {} already holds {} (position {})", rank,
                              to_string(a), i),
                  "pass the program before add_gradient_reduction; it adds one REDUCE_GRAD per stage");
      const bool backward = a.kind == ActionKind::B || a.kind == ActionKind::I ||
                            a.kind == ActionKind::W;
      if (!backward || a.stage < 0 || a.stage >= in.num_stages ||
          in.stage_to_rank[static_cast<size_t>(a.stage)] != static_cast<int64_t>(rank))
        continue;
      const bool send_follows = i + 1 < actions.size() &&
                                actions[i + 1] == Action{ActionKind::SEND_B, a.stage, a.microbatch};
      last[static_cast<size_t>(a.stage)] = send_follows ? i + 1 : i;
    }
  }
  Program out = in;
  for (RankProgram& actions : out.ranks) actions.clear();
  std::vector<std::vector<int64_t>> after(in.ranks.size());  // per rank and index: stages to reduce
  for (int64_t s = 0; s < in.num_stages; ++s) {
    const int64_t rank = in.stage_to_rank[static_cast<size_t>(s)];
    PPCTL_CHECK(rank >= 0 && rank < in.num_ranks(), ScheduleError,
                fmt::format("add_gradient_reduction: stage {} is placed on rank {}, but the program "
                            "has {} ranks",
                            s, rank, in.num_ranks()),
                "place every stage on a rank in [0, number of ranks)");
    PPCTL_CHECK(last[static_cast<size_t>(s)].has_value(), ScheduleError,
                fmt::format("add_gradient_reduction: stage {} has no B, I or W on rank {}, so there "
                            "is no point after its last backward",
                            s, rank),
                "give every stage its backward actions (validate() names what is missing)");
    auto& slots = after[static_cast<size_t>(rank)];
    slots.resize(in.ranks[static_cast<size_t>(rank)].size(), -1);
    slots[*last[static_cast<size_t>(s)]] = s;  // one stage per index: a last backward is one action
  }
  for (size_t rank = 0; rank < in.ranks.size(); ++rank) {
    const RankProgram& actions = in.ranks[rank];
    const std::vector<int64_t>& slots = after[rank];
    for (size_t i = 0; i < actions.size(); ++i) {
      out.ranks[rank].push_back(actions[i]);
      if (i < slots.size() && slots[i] >= 0)
        out.ranks[rank].push_back({ActionKind::REDUCE_GRAD, slots[i], 0});
    }
  }
  return out;
}

namespace detail {

Program empty_program(const ScheduleParams& params, plan::Placement placement) {
  Program program;
  program.stage_to_rank = plan::place_stages(params.ranks, params.virtual_stages, placement);
  program.num_stages = static_cast<int64_t>(program.stage_to_rank.size());
  program.num_microbatches = params.microbatches;
  program.ranks.resize(static_cast<size_t>(params.ranks));
  return program;
}

void three_phases(int64_t total, int64_t warmup, const std::function<void(int64_t)>& forward,
                  const std::function<void(int64_t)>& backward) {
  for (int64_t k = 0; k < warmup; ++k) forward(k);
  for (int64_t k = 0; k < total - warmup; ++k) {
    forward(warmup + k);
    backward(k);
  }
  for (int64_t k = total - warmup; k < total; ++k) backward(k);
}

}  // namespace detail
}  // namespace ppctl::schedule
