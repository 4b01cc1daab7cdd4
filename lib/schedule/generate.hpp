// Schedule generators (pure functions), the pass that adds communication and the one that adds the
// data-parallel gradient reductions. No torch.
#pragma once

#include <cstdint>

#include "config/job_spec.hpp"
#include "schedule/action.hpp"

namespace ppctl::schedule {

/// What a generator needs to know.
struct ScheduleParams {
  config::ScheduleKind kind = config::ScheduleKind::OneFOneB;
  int64_t ranks = 1;           ///< pipeline-parallel size p
  int64_t virtual_stages = 1;  ///< stages per rank v (2 for zbv; >= 2 for interleaved-1f1b)
  int64_t microbatches = 1;    ///< m
  int64_t group_size = 0;      ///< interleaved-1f1b microbatch group size g; 0 means p
  config::ZbAutoSpec zb_auto{};  ///< zb-auto: the costs it places W with (schedule/zb_auto.hpp)
};

/// The generator parameters of a validated job spec (not for custom schedules' contents).
ScheduleParams schedule_params(const config::JobSpec& spec);

/// Checks that a generated schedule kind can be built for these parameters; throws
/// ppctl::ScheduleError stating the rule, naming the job-spec fields and giving the nearest valid
/// values. The rules (each checked over a grid with validate() in tests/schedule/test_generate.cpp):
/// - every kind: p >= 1, m >= 1; custom is never generated (read it with read_csv);
/// - gpipe, 1f1b, zb-h1, zb-auto: v = 1; zbv: v = 2; interleaved-1f1b: v >= 2, g >= 0;
/// - zb-auto: each cost list of params.zb_auto holds 1 or p entries (zb_auto_cost_model);
/// - interleaved-1f1b with g = group_size(params): g >= p, and the last group of microbatches is full
///   or holds at least p of them (m <= g, or m % g == 0, or m % g >= p). Smaller groups make a rank
///   start a chunk before the microbatch it needs has come round the pipeline: for p <= 8,
///   v in {2, 3, 4}, m <= 24, 1548 of the 1764 cases with g < p and m > g deadlock (e.g. p = 4,
///   v = 2, m = 8, g = 2), and so do some with a short last group (e.g. p = 4, v = 3, m = 5, g = 4:
///   "use pipeline.microbatches 4 or 8, or pipeline.microbatch_group_size 5"). Megatron-core's
///   interleaved schedule enforces the same two rules (and g <= m, which is not needed here).
void check_params(const ScheduleParams& params);

/// The interleaved-1f1b microbatch group size in use: params.group_size, or p when it is 0.
int64_t group_size(const ScheduleParams& params);

/// Compute-only program for any generated kind (not custom): GPipe, 1F1B, interleaved 1F1B
/// (Megatron-LM's schedule: rank r does 2(p-r-1) + (v-1)g warmup forwards, chunks visited in groups
/// of g microbatches; arXiv 2104.04473 §2.2), ZB-H1 (arXiv 2401.10241 §3: 1F1B order with B split
/// into I and W, W deferred into the cooldown bubbles) and ZBV (arXiv 2401.10241 §6: V placement,
/// split backward), zb-auto (1F1B's order of F and I, each W placed from params.zb_auto's costs: plan_zb_auto
/// in schedule/zb_auto.hpp). Throws ppctl::ScheduleError via check_params.
Program generate_compute(const ScheduleParams& params);

/// generate_compute(params) followed by add_communication.
Program generate(const ScheduleParams& params);

/// Warmup forwards on `rank`: the forwards it runs before its steady phase, which opens with one
/// more forward (when any is left) and then the rank's first backward (B or I). So the rank runs
/// min(w + 1, its forwards) forwards before its first backward. Throws like check_params.
/// - GPipe: m (all forwards first).
/// - 1F1B, ZB-H1 and zb-auto: min(p - rank - 1, m) (arXiv 2104.04473 §2.2; Megatron-LM schedules.py).
/// - interleaved-1f1b: min(2(p - rank - 1) + (v - 1) g, m v) (Megatron-core
///   forward_backward_pipelining_with_interleaving, g = group_size(params)).
/// - ZBV: min(2p - rank - 1, m) + min(rank, m): 2(p - rank) - 1 forwards of the rank's first stage,
///   then `rank` pairs of (second stage, first stage) (torch.distributed.pipelining
///   ScheduleZBVZeroBubble), counting only microbatches below m.
int64_t warmup_microbatches(const ScheduleParams& params, int64_t rank);

/// warmup_microbatches for a kind with one stage per rank (gpipe, 1f1b, zb-h1, zb-auto): `stages` ranks.
/// Throws ppctl::ScheduleError for interleaved-1f1b, zbv and custom (use the overload above).
int64_t warmup_microbatches(config::ScheduleKind kind, int64_t stages, int64_t microbatches,
                            int64_t rank);

/// Compute-only program for a kind with one stage per rank (gpipe, 1f1b, zb-h1; zb-auto with its default
/// costs): `stages` ranks,
/// stage s on rank s, `microbatches` m. GPipe: F0..F(m-1) then B0..B(m-1) on each rank. 1F1B:
/// warmup forwards (warmup_microbatches), then steady pairs F(k) B(j), then cooldown backwards.
/// Same as generate_compute({kind, stages, 1, microbatches, 0}). Throws ppctl::ScheduleError if
/// stages < 1 or microbatches < 1 (or via check_params).
Program generate_compute(config::ScheduleKind kind, int64_t stages, int64_t microbatches);

/// Adds the communication to a compute-only program. For each compute action on a rank:
/// F(s,j), s > 0: RECV_F(s,j); F(s,j), s < p-1: SEND_F(s,j) right after it.
/// B(s,j) or I(s,j), s < p-1: RECV_B(s,j); B(s,j) or I(s,j), s > 0: SEND_B(s,j) right after it.
/// W(s,j): nothing (it only needs I(s,j), earlier on the same rank).
/// A RECV is placed one compute action early (just before the previous compute action of the rank,
/// or first if there is none) so the transfer overlaps that compute; RECV only posts the receive,
/// the consuming compute action waits for it. Sends never block until the end of the step.
/// Stages on the same rank (virtual stages) exchange tensors locally, without SEND/RECV.
Program add_communication(const Program& compute_only);

/// generate_compute(kind, stages, microbatches) followed by add_communication.
Program generate(config::ScheduleKind kind, int64_t stages, int64_t microbatches);

/// Adds one REDUCE_GRAD per stage to a program (normally with communication, from add_communication):
/// on the rank stage_to_rank[s], right after the stage's last backward action in the rank's order
/// (the last of its B, I and W), and after that action's SEND_B when the SEND_B directly follows it
/// (the gradient is posted to the previous rank first, so starting the reduction never delays the
/// pipeline). The executor starts the stage's asynchronous bucket all-reduces there and waits for them
/// before the optimizer step, so they overlap the backward work left on the rank. Source:
/// torch.distributed.pipelining's `_add_reduce_grad` (schedules.py: REDUCE_GRAD after a stage's last
/// B or W) and Megatron-Core's overlap_grad_reduce (a model chunk's gradients are synchronized once
/// the backward of its last microbatch is done). Not idempotent: throws ppctl::ScheduleError when the
/// program already holds a REDUCE_GRAD, when stage_to_rank does not give one rank per stage or names a
/// rank outside the program, or when a stage has no B, I or W on its rank.
Program add_gradient_reduction(const Program& with_communication);

}  // namespace ppctl::schedule
