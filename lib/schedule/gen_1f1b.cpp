// Flush schedules with one stage per rank: GPipe, 1F1B and ZB-H1 (1F1B with the backward split).
#include <deque>

#include "schedule/generators.hpp"

namespace ppctl::schedule::detail {

/// Stage s runs on rank s. Per rank, with w = warmup_microbatches, the three loops of Megatron-LM's
/// forward_backward_pipelining_without_interleaving (arXiv 2104.04473 §2.2, Figure 4):
/// F0..F(w-1); then for k in [0, m-w): F(w+k), backward(k); then backward(m-w)..backward(m-1).
/// GPipe is the w = m case: no steady pairs, all backwards in the cooldown. At most min(p - r, m)
/// forwards are in flight on rank r under 1F1B, against m under GPipe.
///
/// ZB-H1 (Qi et al., Zero Bubble Pipeline Parallelism, arXiv 2401.10241 §3.1, Figure 3) keeps that
/// order of F and splits each backward into I (input gradient, which the previous stage waits for)
/// and W (weight gradient, which nobody waits for). Rank r runs I(k) where 1F1B runs B(k) and keeps
/// up to r weight gradients pending, running the oldest W whenever more are pending; the last ones
/// run at the end. The I chain from the last rank back to rank 0 then costs T_I instead of
/// T_I + T_W per rank, and rank r's deferred W fill the r cooldown slots in which it would wait for
/// rank r+1: the bubble falls from (p-1)(T_F + T_I + T_W) to (p-1)(T_F + T_I - T_W), a third of
/// 1F1B's when the three costs are equal. Rank r holds at most (p - r) + r = p activations (from F
/// to W), rank 0's peak under 1F1B, so the peak over ranks does not grow. This is the uniform split
/// of the paper's handcrafted schedule (DeepSpeed's "exact semantics" variant); W of one stage
/// still runs in microbatch order.
Program flush_schedule(const ScheduleParams& params) {
  Program program = empty_program(params, plan::Placement::Loop);
  const bool split = params.kind == config::ScheduleKind::ZBH1;
  for (int64_t rank = 0; rank < params.ranks; ++rank) {
    RankProgram& actions = program.ranks[static_cast<size_t>(rank)];
    actions.reserve(static_cast<size_t>((split ? 3 : 2) * params.microbatches));
    std::deque<int64_t> pending_w;
    const auto run_w_beyond = [&](int64_t keep) {
      for (; static_cast<int64_t>(pending_w.size()) > keep; pending_w.pop_front())
        actions.push_back({ActionKind::W, rank, pending_w.front()});
    };
    const auto forward = [&](int64_t j) { actions.push_back({ActionKind::F, rank, j}); };
    const auto backward = [&](int64_t j) {
      if (!split) {
        actions.push_back({ActionKind::B, rank, j});
        return;
      }
      actions.push_back({ActionKind::I, rank, j});
      pending_w.push_back(j);
      run_w_beyond(rank);
    };
    three_phases(params.microbatches, warmup(params, rank), forward, backward);
    run_w_beyond(0);
  }
  return program;
}

}  // namespace ppctl::schedule::detail
