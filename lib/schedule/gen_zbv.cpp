// ZBV: the zero-bubble schedule with two stages per rank in a V and the backward split into I and
// W.
#include <algorithm>
#include <array>
#include <deque>
#include <initializer_list>

#include "core/check.hpp"
#include "schedule/generators.hpp"

namespace ppctl::schedule::detail {
namespace {

/// One step of a phase: an F, I or W of chunk 0 (stage r) or chunk 1 (stage 2p-1-r).
struct Step {
  ActionKind kind;
  int chunk;
};

/// One rank's program under construction: per chunk, the next microbatch to forward and to run I
/// for, and the I whose W is still due. Actions for microbatches at or beyond m are counted but not
/// emitted (see zbv()).
class ZbvRank {
 public:
  ZbvRank(RankProgram& out, int64_t p, int64_t rank, int64_t m)
      : out_(out), stage_{rank, 2 * p - 1 - rank}, m_(m) {}

  /// Runs `steps` `times` times over. A W runs for the oldest pending I of its chunk.
  void repeat(int64_t times, std::initializer_list<Step> steps) {
    for (int64_t t = 0; t < times; ++t)
      for (const Step& step : steps) run(step);
  }
  /// Every W still due on chunk c.
  void all_w(int c) {
    while (!pending_w_[c].empty()) run({ActionKind::W, c});
  }
  int64_t forwards(int c) const { return next_f_[c]; }
  int64_t input_grads(int c) const { return next_i_[c]; }

 private:
  void run(Step step) {
    const int c = step.chunk;
    if (step.kind == ActionKind::F) {
      emit(ActionKind::F, c, next_f_[c]++);
    } else if (step.kind == ActionKind::I) {
      pending_w_[c].push_back(next_i_[c]);
      emit(ActionKind::I, c, next_i_[c]++);
    } else {
      emit(ActionKind::W, c, pending_w_[c].front());
      pending_w_[c].pop_front();
    }
  }

  void emit(ActionKind kind, int c, int64_t microbatch) {
    if (microbatch < m_) out_.push_back({kind, stage_[c], microbatch});
  }

  RankProgram& out_;
  std::array<int64_t, 2> stage_;
  int64_t m_;
  std::array<int64_t, 2> next_f_{0, 0};
  std::array<int64_t, 2> next_i_{0, 0};
  std::array<std::deque<int64_t>, 2> pending_w_;
};

}  // namespace

/// Qi et al., arXiv 2401.10241 §6 (Figure 8), in the phases of torch.distributed.pipelining's
/// ScheduleZBVZeroBubble. Rank r holds stage r (chunk 0) and stage 2p-1-r (chunk 1), so the last
/// stage sits on rank 0 next to the first, and the turn of the V (stages p-1 and p) on rank p-1.
/// With n = max(m, 2p - 1) microbatches, rank r runs:
///   warmup:    2(p - r) - 1 x F0;  r x (F1, F0);  p - r x (F1, I1, W1)
///   steady:    while chunk 1 trails chunk 0 or chunk 0 has forwards left: [F0], I0, W0, F1, I1, W1
///   cooldown:  r x (I0, I1);  p - r x (I0, W0);  then every pending W of chunk 1, then of chunk 0.
/// Chunk 1 on rank r is fed by chunk 1 on rank r+1 (and chunk 0 on rank p-1), so the steady phase
/// keeps one microbatch of each chunk moving, and the W left for the cooldown fill its bubbles.
/// The phases need n >= 2p - 1; for smaller m the actions of microbatches m..n-1 are left out,
/// which keeps every dependency of the rest (a microbatch only waits on itself).
Program zbv(const ScheduleParams& params) {
  Program program = empty_program(params, plan::Placement::V);
  const int64_t p = params.ranks;
  const int64_t n = std::max(params.microbatches, 2 * p - 1);
  for (int64_t r = 0; r < p; ++r) {
    RankProgram& actions = program.ranks[static_cast<size_t>(r)];
    actions.reserve(static_cast<size_t>(6 * params.microbatches));
    ZbvRank rank(actions, p, r, params.microbatches);
    constexpr ActionKind F = ActionKind::F, I = ActionKind::I, W = ActionKind::W;
    rank.repeat(2 * (p - r) - 1, {{F, 0}});
    rank.repeat(r, {{F, 1}, {F, 0}});
    rank.repeat(p - r, {{F, 1}, {I, 1}, {W, 1}});
    while (rank.forwards(1) < rank.forwards(0) || rank.forwards(0) < n) {
      rank.repeat(rank.forwards(0) < n ? 1 : 0, {{F, 0}});
      rank.repeat(1, {{I, 0}, {W, 0}, {F, 1}, {I, 1}, {W, 1}});
    }
    rank.repeat(r, {{I, 0}, {I, 1}});
    rank.repeat(p - r, {{I, 0}, {W, 0}});
    rank.all_w(1);
    rank.all_w(0);
    for (int c : {0, 1})
      PPCTL_ASSERT(rank.forwards(c) == n && rank.input_grads(c) == n,
                   fmt::format("zbv rank {} chunk {}: {} forwards and {} input gradients for {} "
                               "microbatches",
                               r, c, rank.forwards(c), rank.input_grads(c), n));
  }
  return program;
}

}  // namespace ppctl::schedule::detail
