// The flush schedules in Megatron-LM's three phases (warmup, steady 1F1B, cooldown): GPipe, 1F1B and ZB-H1
// (1F1B with the backward split) with one stage per rank, and interleaved 1F1B with v stages per rank.
#include <algorithm>
#include <deque>
#include <utility>
#include <vector>

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

namespace {

/// The order in which a rank visits (microbatch, chunk) pairs, as in Megatron-core's
/// get_schedule_table: microbatches in groups of g; within a group every chunk in turn runs the
/// whole group; the last group takes what is left (fewer than g when g does not divide m).
/// E.g. m = 5, v = 2, g = 2: (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1) (3,1) (4,0) (4,1).
std::vector<std::pair<int64_t, int64_t>> visit_order(int64_t m, int64_t v, int64_t g) {
  std::vector<std::pair<int64_t, int64_t>> order;
  order.reserve(static_cast<size_t>(m * v));
  for (int64_t first = 0; first < m; first += g) {
    const int64_t end = std::min(first + g, m);
    for (int64_t chunk = 0; chunk < v; ++chunk)
      for (int64_t j = first; j < end; ++j) order.emplace_back(j, chunk);
  }
  return order;
}

}  // namespace

/// Narayanan et al., arXiv 2104.04473 §2.2 (Figure 4, bottom), as Megatron-core's
/// forward_backward_pipelining_with_interleaving runs it. Rank r holds chunks c = 0..v-1, chunk c
/// being stage c p + r. Its k-th forward is the k-th pair of visit_order; its k-th backward is the
/// same pair with the chunk mirrored (v - 1 - c), so backwards start from the last chunk. Rank r
/// runs w = min(2(p - r - 1) + (v - 1) g, m v) warmup forwards (warmup_microbatches), then 1F1B
/// pairs, then the remaining backwards (three_phases). With equal costs the idle time is 1F1B's
/// divided by v: each chunk is 1/v of a rank's layers, and the warmup still spans p - 1 steps of
/// one chunk.
Program interleaved_1f1b(const ScheduleParams& params) {
  Program program = empty_program(params, plan::Placement::Loop);
  const int64_t p = params.ranks;
  const int64_t v = params.virtual_stages;
  const auto order = visit_order(params.microbatches, v, group_size(params));
  for (int64_t rank = 0; rank < p; ++rank) {
    RankProgram& actions = program.ranks[static_cast<size_t>(rank)];
    actions.reserve(2 * order.size());
    const auto run = [&](ActionKind kind, int64_t k) {
      const auto [microbatch, chunk] = order[static_cast<size_t>(k)];
      const int64_t mirrored = kind == ActionKind::F ? chunk : v - 1 - chunk;
      actions.push_back({kind, mirrored * p + rank, microbatch});
    };
    three_phases(
        static_cast<int64_t>(order.size()), warmup(params, rank),
        [&](int64_t k) { run(ActionKind::F, k); }, [&](int64_t k) { run(ActionKind::B, k); });
  }
  return program;
}

}  // namespace ppctl::schedule::detail
