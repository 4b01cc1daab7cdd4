// Schedule generators (pure functions) and the pass that adds communication. No torch.
#pragma once

#include <cstdint>

#include "config/job_spec.hpp"
#include "schedule/action.hpp"

namespace ppctl::schedule {

/// Warmup forwards on `rank` before its first backward.
/// GPipe: m. 1F1B: min(p - rank - 1, m) (arXiv 2104.04473 §2.2; Megatron-LM schedules.py).
int64_t warmup_microbatches(config::ScheduleKind kind, int64_t stages, int64_t microbatches,
                            int64_t rank);

/// Compute-only program (F and B actions) for `stages` ranks, stage s on rank s, `microbatches` m.
/// GPipe: F0..F(m-1) then B0..B(m-1) on each rank.
/// 1F1B: warmup forwards (warmup_microbatches), then steady pairs F(k) B(j), then cooldown backwards.
/// Throws ppctl::ScheduleError if stages < 1 or microbatches < 1.
Program generate_compute(config::ScheduleKind kind, int64_t stages, int64_t microbatches);

/// Adds the communication to a compute-only program. For each compute action on a rank:
/// F(s,j), s > 0: RECV_F(s,j); F(s,j), s < p-1: SEND_F(s,j) right after it.
/// B(s,j), s < p-1: RECV_B(s,j); B(s,j), s > 0: SEND_B(s,j) right after it.
/// A RECV is placed one compute action early (just before the previous compute action of the rank,
/// or first if there is none) so the transfer overlaps that compute; RECV only posts the receive,
/// the consuming compute action waits for it. Sends never block until the end of the step.
/// Stages on the same rank (virtual stages) exchange tensors locally, without SEND/RECV.
Program add_communication(const Program& compute_only);

/// generate_compute followed by add_communication.
Program generate(config::ScheduleKind kind, int64_t stages, int64_t microbatches);

}  // namespace ppctl::schedule
