// The per-kind generators behind generate_compute(params), and what they share. Internal to
// schedule/; callers use generate.hpp. No torch.
#pragma once

#include <cstdint>
#include <functional>

#include "plan/layout.hpp"
#include "schedule/generate.hpp"

namespace ppctl::schedule::detail {

/// A compute-only program with no actions yet: p x v stages placed by `placement` on p ranks.
Program empty_program(const ScheduleParams& params, plan::Placement placement);

/// warmup_microbatches without its checks (the generators run after check_params).
int64_t warmup(const ScheduleParams& params, int64_t rank);

/// The three loops of a flush schedule on one rank (Megatron-LM schedules.py): `warmup` forwards,
/// then `total - warmup` steady pairs (forward k + warmup, backward k), then the remaining
/// backwards. forward(k) / backward(k) append the k-th forward / backward of the rank, k in [0,
/// total).
void three_phases(int64_t total, int64_t warmup, const std::function<void(int64_t)>& forward,
                  const std::function<void(int64_t)>& backward);

/// GPipe, 1F1B and ZB-H1 (one stage per rank). See generate.hpp.
Program flush_schedule(const ScheduleParams& params);

/// Interleaved 1F1B (Megatron-LM's virtual pipeline). See generate.hpp.
Program interleaved_1f1b(const ScheduleParams& params);

/// ZBV (two stages per rank in a V, split backward). See generate.hpp.
Program zbv(const ScheduleParams& params);

}  // namespace ppctl::schedule::detail
