// Schedule validator: static dependency checks, then an event-driven simulation of blocking
// semantics.
#include "schedule/validate.hpp"

#include <fmt/format.h>

#include <optional>

#include "core/error.hpp"

namespace ppctl::schedule {
namespace {

// The rules, as they appear in error messages (tests match on these texts).
constexpr std::string_view kRuleGeometry = "program geometry";
constexpr std::string_view kRuleRange = "stage and microbatch in range";
constexpr std::string_view kRuleRank = "action on the rank of its stage";
constexpr std::string_view kRulePeer =
    "transfers only between neighbouring stages on different ranks";
constexpr std::string_view kRuleComputeOnce = "each F and B exactly once";
constexpr std::string_view kRuleSplit = "each backward as one B, or as one I and one W";
constexpr std::string_view kRuleTransferOnce = "each SEND and RECV exactly once";
constexpr std::string_view kRuleMatch = "every SEND has its RECV and vice versa";
constexpr std::string_view kRuleNeedsTransfer = "cross-rank input needs a SEND/RECV pair";
constexpr std::string_view kRuleForwardFirst = "F before B on its rank";
constexpr std::string_view kRuleInputFirst = "I before W on its rank";
constexpr std::string_view kRuleRecvFirst = "RECV before the compute that consumes it";
constexpr std::string_view kRuleProducerFirst = "SEND after the compute that produces it";
constexpr std::string_view kRuleLocalOrder = "stages on one rank in dependency order";
constexpr std::string_view kRuleReduceOnce = "at most one REDUCE_GRAD per stage";
constexpr std::string_view kRuleReduceLast = "REDUCE_GRAD after every B, I and W of its stage";
constexpr std::string_view kRuleDeadlock = "no deadlock";

/// Where an action stands: rank and index in that rank's program.
struct Where {
  size_t rank = kUnmarked;
  size_t index = kUnmarked;
  bool found() const { return rank != kUnmarked; }
};

/// Runs the checks of validate() in order; the first broken rule throws.
class Validator {
 public:
  explicit Validator(const Program& program)
      : program_(program), p_(program.num_stages), m_(program.num_microbatches) {}

  void run() {
    check_geometry();
    index_actions();
    check_complete();
    check_transfers();
    check_local_order();
    simulate();
  }

 private:
  const Program& program_;
  int64_t p_;
  int64_t m_;
  std::vector<Where> where_;  // by id(): first occurrence of each action

  size_t num_ranks() const { return program_.ranks.size(); }
  const Action& at(Where w) const { return program_.ranks[w.rank][w.index]; }
  size_t rank_of(int64_t stage) const {
    return static_cast<size_t>(program_.stage_to_rank[static_cast<size_t>(stage)]);
  }

  /// Number of action kinds: ActionKind's enumerators are 0 .. kKinds-1 (F, B, I, W, SEND_F, ...).
  static constexpr int64_t kKinds = 9;
  static_assert(static_cast<int64_t>(ActionKind::REDUCE_GRAD) == kKinds - 1,
                "ActionKind grew: update kKinds");

  /// Dense index of an in-range action: (kind, stage, microbatch); REDUCE_GRAD has microbatch 0.
  size_t id(const Action& a) const {
    return static_cast<size_t>((static_cast<int64_t>(a.kind) * p_ + a.stage) * m_ + a.microbatch);
  }
  size_t num_ids() const { return static_cast<size_t>(kKinds * p_ * m_); }
  bool has(const Action& a) const { return where_[id(a)].found(); }

  /// The action that computes the input gradient of (stage, microbatch): B, or I when the backward
  /// is split. After check_complete() exactly one of them exists.
  Action backward(int64_t stage, int64_t microbatch) const {
    const Action full{ActionKind::B, stage, microbatch};
    return has(full) ? full : Action{ActionKind::I, stage, microbatch};
  }

  /// The compute action on the same rank whose output `a` consumes, if any: upstream_compute, with
  /// the gradient taken from whichever of B / I the upstream stage runs.
  std::optional<Action> local_upstream(const Action& a) const {
    const auto upstream = upstream_compute(a, p_);
    if (!upstream || upstream->kind == ActionKind::F) return upstream;
    return backward(upstream->stage, upstream->microbatch);
  }

  [[noreturn]] void fail(std::string_view rule, const std::string& detail,
                         const std::vector<size_t>& positions = {}) const {
    throw ScheduleError(fmt::format("invalid schedule (rule: {}): {}\n{}", rule, detail,
                                    format_grid(program_, positions)));
  }

  /// Fails marking only the action at `w`.
  [[noreturn]] void fail_at(std::string_view rule, Where w, const std::string& detail) const {
    std::vector<size_t> positions(num_ranks(), kUnmarked);
    positions[w.rank] = w.index;
    fail(rule, fmt::format("{} (rank {}, position {})", detail, w.rank, w.index), positions);
  }

  void check_geometry() const {
    if (p_ < 1 || m_ < 1 || static_cast<int64_t>(program_.stage_to_rank.size()) != p_)
      fail(kRuleGeometry,
           fmt::format("num_stages = {}, num_microbatches = {}, stage_to_rank has {} entries; need "
                       "num_stages >= 1, num_microbatches >= 1 and one rank per stage",
                       p_, m_, program_.stage_to_rank.size()));
    for (int64_t s = 0; s < p_; ++s) {
      const int64_t rank = program_.stage_to_rank[static_cast<size_t>(s)];
      if (rank < 0 || rank >= static_cast<int64_t>(num_ranks()))
        fail(kRuleGeometry,
             fmt::format("stage {} maps to rank {}, outside [0, {}) (the program has "
                         "{} ranks)",
                         s, rank, num_ranks(), num_ranks()));
    }
  }

  /// Per action: range, kind, rank, peer; records first positions and rejects duplicates.
  void index_actions() {
    where_.assign(num_ids(), Where{});
    for (size_t r = 0; r < num_ranks(); ++r) {
      const RankProgram& actions = program_.ranks[r];
      for (size_t i = 0; i < actions.size(); ++i) {
        const Action& a = actions[i];
        const Where here{r, i};
        const std::string text = to_string(a);
        if (is_reduce(a.kind) && a.microbatch != 0)
          fail_at(kRuleRange, here,
                  fmt::format("{} has microbatch {}: a REDUCE_GRAD covers every microbatch of its "
                              "stage and carries microbatch 0",
                              text, a.microbatch));
        if (a.stage < 0 || a.stage >= p_ || a.microbatch < 0 || a.microbatch >= m_)
          fail_at(
              kRuleRange, here,
              fmt::format("{}: stage must be in [0, {}) and microbatch in [0, {})", text, p_, m_));
        if (rank_of(a.stage) != r)
          fail_at(kRuleRank, here,
                  fmt::format("{} is on rank {} but stage {} runs on rank {}", text, r, a.stage,
                              rank_of(a.stage)));
        if (is_send(a.kind) || is_recv(a.kind)) check_peer(a, here);
        Where& first = where_[id(a)];
        if (first.found())
          fail_at(is_compute(a.kind)  ? kRuleComputeOnce
                  : is_reduce(a.kind) ? kRuleReduceOnce
                                      : kRuleTransferOnce,
                  here,
                  fmt::format("{} appears again on rank {}, first at position {}", text, r,
                              first.index));
        first = here;
      }
    }
  }

  void check_peer(const Action& a, Where here) const {
    const int64_t peer = matching_peer_stage(a);
    if (peer < 0 || peer >= p_)
      fail_at(
          kRulePeer, here,
          fmt::format("{}: stage {} has no neighbouring stage {}", to_string(a), a.stage, peer));
    if (rank_of(peer) == here.rank)
      fail_at(kRulePeer, here,
              fmt::format("{}: stages {} and {} both run on rank {} and exchange tensors locally",
                          to_string(a), a.stage, peer, here.rank));
  }

  /// Stage at the other end of a transfer (may be out of range).
  static int64_t matching_peer_stage(const Action& a) {
    switch (a.kind) {
      case ActionKind::SEND_F:
      case ActionKind::RECV_B:
        return a.stage + 1;
      default:
        return a.stage - 1;  // RECV_F, SEND_B
    }
  }

  /// Every (s,j) has its F, and its backward either as one B or split into one I and one W.
  void check_complete() const {
    for (int64_t s = 0; s < p_; ++s)
      for (int64_t j = 0; j < m_; ++j) {
        const Action f{ActionKind::F, s, j};
        const Action b{ActionKind::B, s, j};
        const Action i{ActionKind::I, s, j};
        const Action w{ActionKind::W, s, j};
        const auto missing = [&](std::string_view rule, const Action& a, std::string_view why) {
          fail(rule, fmt::format("{} is missing (stage {} runs on rank {}){}", to_string(a), s,
                                 rank_of(s), why));
        };
        if (!has(f)) missing(kRuleComputeOnce, f, "");
        if (has(b) && (has(i) || has(w))) {
          const Action& split = has(i) ? i : w;
          fail_at(
              kRuleSplit, where_[id(split)],
              fmt::format("{} and {} both appear: a backward is either one B or one I and one W",
                          to_string(b), to_string(split)));
        }
        if (has(i) && !has(w)) missing(kRuleSplit, w, ", but its I splits the backward");
        if (has(w) && !has(i)) missing(kRuleSplit, i, ", but its W splits the backward");
        if (!has(b) && !has(i)) missing(kRuleComputeOnce, b, "");
      }
  }

  /// Every transfer has its other end; every cross-rank input has its RECV (hence its SEND).
  void check_transfers() const {
    for (size_t r = 0; r < num_ranks(); ++r) {
      const RankProgram& actions = program_.ranks[r];
      for (size_t i = 0; i < actions.size(); ++i) {
        const Action& a = actions[i];
        if (is_compute(a.kind)) {
          const auto recv = input_transfer(a, program_);
          if (recv && !where_[id(*recv)].found())
            fail_at(
                kRuleNeedsTransfer, {r, i},
                fmt::format("{} takes its input from stage {} on rank {}, but rank {} never posts "
                            "{}",
                            to_string(a), matching_peer_stage(*recv),
                            rank_of(matching_peer_stage(*recv)), r, to_string(*recv)));
          continue;
        }
        if (is_reduce(a.kind)) continue;  // a collective of the stage's replicas, no peer here
        const Action other = matching_transfer(a);
        if (!where_[id(other)].found())
          fail_at(kRuleMatch, {r, i},
                  fmt::format("{} on rank {} has no matching {} on rank {}", to_string(a), r,
                              to_string(other), rank_of(other.stage)));
      }
    }
  }

  /// Fails at `later` unless `earlier` (an action on the same rank) comes before it.
  void require_before(const Action& earlier, Where later, std::string_view rule,
                      std::string_view relation) const {
    const Where first = where_[id(earlier)];
    if (first.index > later.index)
      fail_at(rule, later,
              fmt::format("{} comes before {} ({}) on rank {}", to_string(at(later)),
                          to_string(earlier), relation, later.rank));
  }

  void check_local_order() const {
    for (size_t r = 0; r < num_ranks(); ++r) {
      const RankProgram& actions = program_.ranks[r];
      for (size_t i = 0; i < actions.size(); ++i) {
        const Action& a = actions[i];
        const Where here{r, i};
        if (is_send(a.kind)) {
          const Action producer = a.kind == ActionKind::SEND_F
                                      ? Action{ActionKind::F, a.stage, a.microbatch}
                                      : backward(a.stage, a.microbatch);
          require_before(producer, here, kRuleProducerFirst, "which computes the tensor it sends");
        }
        if (is_reduce(a.kind)) check_reduce_last(here);
        if (!is_compute(a.kind)) continue;
        if (a.kind == ActionKind::B || a.kind == ActionKind::I)
          require_before({ActionKind::F, a.stage, a.microbatch}, here, kRuleForwardFirst,
                         "its forward");
        if (a.kind == ActionKind::W)
          require_before({ActionKind::I, a.stage, a.microbatch}, here, kRuleInputFirst,
                         "which computes the gradient its weight gradient needs");
        if (const auto recv = input_transfer(a, program_))
          require_before(*recv, here, kRuleRecvFirst, "which receives its input");
        else if (const auto upstream = local_upstream(a))
          require_before(*upstream, here, kRuleLocalOrder, "which produces its input on this rank");
      }
    }
  }

  /// REDUCE_GRAD(s) at `here` comes after every backward action of stage s (its B, or its I and W,
  /// for each microbatch); all are on this rank, as index_actions checked. O(m).
  void check_reduce_last(Where here) const {
    const int64_t s = at(here).stage;
    for (int64_t j = 0; j < m_; ++j) {
      const Action input = backward(s, j);
      const auto relation = "a backward of its stage, which must be done before the stage's "
                            "gradients are reduced";
      require_before(input, here, kRuleReduceLast, relation);
      if (input.kind == ActionKind::I)
        require_before({ActionKind::W, s, j}, here, kRuleReduceLast, relation);
    }
  }

  /// What compute action `a` waits for, in the executor's semantics (see validate.hpp).
  std::vector<Action> awaited(const Action& a) const {
    std::vector<Action> out;
    if (a.kind == ActionKind::B || a.kind == ActionKind::I)
      out.push_back({ActionKind::F, a.stage, a.microbatch});
    if (a.kind == ActionKind::W) out.push_back({ActionKind::I, a.stage, a.microbatch});
    if (const auto recv = input_transfer(a, program_)) {
      out.push_back(*recv);
      out.push_back(matching_transfer(*recv));
    } else if (const auto upstream = local_upstream(a)) {
      out.push_back(*upstream);
    }
    return out;
  }

  /// Runs every rank until it blocks; a rank that blocks waits on one action and is woken when that
  /// action executes. Each action executes once and each block wakes once: O(total actions).
  void simulate() const {
    const size_t ranks = num_ranks();
    std::vector<size_t> pc(ranks, 0);
    std::vector<char> done(num_ids(), 0);
    std::vector<int64_t> first_waiter(num_ids(), -1);  // linked list of ranks blocked on an action
    std::vector<int64_t> next_waiter(ranks, -1);
    std::vector<Action> blocked_on(ranks);
    std::vector<size_t> ready;
    for (size_t r = ranks; r-- > 0;) ready.push_back(r);
    while (!ready.empty()) {
      const size_t r = ready.back();
      ready.pop_back();
      const RankProgram& actions = program_.ranks[r];
      while (pc[r] < actions.size()) {
        const Action& a = actions[pc[r]];
        std::optional<Action> missing;
        if (is_compute(a.kind))
          for (const Action& need : awaited(a))
            if (!done[id(need)]) {
              missing = need;
              break;
            }
        if (missing) {
          blocked_on[r] = *missing;
          next_waiter[r] = first_waiter[id(*missing)];
          first_waiter[id(*missing)] = static_cast<int64_t>(r);
          break;
        }
        const size_t key = id(a);
        done[key] = 1;
        for (int64_t w = first_waiter[key]; w >= 0; w = next_waiter[static_cast<size_t>(w)])
          ready.push_back(static_cast<size_t>(w));
        first_waiter[key] = -1;
        ++pc[r];
      }
    }
    std::string stuck;
    for (size_t r = 0; r < ranks; ++r) {
      if (pc[r] >= program_.ranks[r].size()) continue;
      const Action& need = blocked_on[r];
      stuck +=
          fmt::format("{}rank {} waits at {} for {} (rank {})", stuck.empty() ? "" : "; ", r,
                      to_string(program_.ranks[r][pc[r]]), to_string(need), rank_of(need.stage));
    }
    if (!stuck.empty()) fail(kRuleDeadlock, fmt::format("no rank can proceed: {}", stuck), pc);
  }
};

}  // namespace

/// Rules from DESIGN.md "The schedule as data"; blocking semantics as in Megatron-LM's batched
/// isend/irecv (arXiv 2104.04473 §2.2): only compute waits, and only for tensors it consumes.
void validate(const Program& program) { Validator(program).run(); }

std::string format_grid(const Program& program, const std::vector<size_t>& positions) {
  std::string out;
  for (size_t r = 0; r < program.ranks.size(); ++r) {
    const RankProgram& actions = program.ranks[r];
    const size_t mark = r < positions.size() ? positions[r] : kUnmarked;
    if (r > 0) out += '\n';
    out += fmt::format("rank {}:", r);
    for (size_t i = 0; i < actions.size(); ++i)
      out +=
          (i == mark) ? fmt::format(" [{}]", to_string(actions[i])) : " " + to_string(actions[i]);
    if (mark != kUnmarked && mark >= actions.size()) out += " [end]";
  }
  return out;
}

}  // namespace ppctl::schedule
