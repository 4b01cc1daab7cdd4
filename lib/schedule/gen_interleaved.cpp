// Interleaved 1F1B: v stages (model chunks) per rank, stage k on rank k mod p, Megatron-LM's order.
#include <algorithm>
#include <utility>
#include <vector>

#include "schedule/generators.hpp"

namespace ppctl::schedule::detail {
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
