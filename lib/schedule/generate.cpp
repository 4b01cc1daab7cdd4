// Schedule generators (GPipe, 1F1B) as pure functions, and the pass that inserts SEND/RECV actions.
#include "schedule/generate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"

namespace ppctl::schedule {
namespace {

std::string_view kind_name(config::ScheduleKind kind) {
  return kind == config::ScheduleKind::GPipe ? "gpipe" : "1f1b";
}

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

}  // namespace

/// GPipe (Huang et al., arXiv 1811.06965 §2.3) runs every forward before any backward: warmup = m.
/// 1F1B as in Megatron-LM's forward_backward_pipelining_without_interleaving (Narayanan et al.,
/// arXiv 2104.04473 §2.2): rank r runs min(p - r - 1, m) forwards before its steady phase, so the
/// last rank starts its first backward right after its first forward.
int64_t warmup_microbatches(config::ScheduleKind kind, int64_t stages, int64_t microbatches,
                            int64_t rank) {
  check_geometry(stages, microbatches);
  PPCTL_CHECK(rank >= 0 && rank < stages, ScheduleError,
              fmt::format("{} warmup: rank {} is outside [0, {}) for {} stages", kind_name(kind),
                          rank, stages, stages),
              "pass a rank in [0, stages)");
  if (kind == config::ScheduleKind::GPipe) return microbatches;
  return std::min(stages - rank - 1, microbatches);
}

/// Stage s runs on rank s. Per rank, with w = warmup_microbatches:
/// GPipe: F0..F(m-1), B0..B(m-1).
/// 1F1B: F0..F(w-1); then for i in [0, m-w): F(w+i), B(i); then B(m-w)..B(m-1) — the warmup,
/// steady and cooldown loops of Megatron-LM's schedules.py (arXiv 2104.04473 §2.2, Figure 4). At
/// most min(p - r, m) forwards are in flight on rank r, against m for GPipe.
Program generate_compute(config::ScheduleKind kind, int64_t stages, int64_t microbatches) {
  check_geometry(stages, microbatches);
  Program program;
  program.num_stages = stages;
  program.num_microbatches = microbatches;
  program.stage_to_rank.resize(static_cast<size_t>(stages));
  program.ranks.resize(static_cast<size_t>(stages));
  for (int64_t rank = 0; rank < stages; ++rank) {
    program.stage_to_rank[static_cast<size_t>(rank)] = rank;
    RankProgram& actions = program.ranks[static_cast<size_t>(rank)];
    actions.reserve(static_cast<size_t>(2 * microbatches));
    const auto forward = [&](int64_t j) { actions.push_back({ActionKind::F, rank, j}); };
    const auto backward = [&](int64_t j) { actions.push_back({ActionKind::B, rank, j}); };
    // GPipe is the w = m case of the same three loops: no steady pairs, all backwards in cooldown.
    const int64_t warmup = warmup_microbatches(kind, stages, microbatches, rank);
    for (int64_t j = 0; j < warmup; ++j) forward(j);
    for (int64_t i = 0; i < microbatches - warmup; ++i) {
      forward(warmup + i);
      backward(i);
    }
    for (int64_t j = microbatches - warmup; j < microbatches; ++j) backward(j);
  }
  return program;
}

/// Output per rank, for its compute actions c0, c1, ...:
///   RECV(c0) RECV(c1) c0 SEND(c0) RECV(c2) c1 SEND(c1) RECV(c3) c2 SEND(c2) ...
/// where RECV(c)/SEND(c) are input_transfer/output_transfer (absent when the neighbouring stage is
/// on the same rank or does not exist). Posting each receive one compute action early lets the
/// transfer overlap that compute; sends are issued as soon as their tensor exists (non-blocking,
/// see DESIGN.md: a blocking Gloo send deadlocks 1F1B).
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

Program generate(config::ScheduleKind kind, int64_t stages, int64_t microbatches) {
  return add_communication(generate_compute(kind, stages, microbatches));
}

}  // namespace ppctl::schedule
