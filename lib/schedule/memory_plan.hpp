// Memory per pipeline rank for a whole Program: static bytes (parameters, gradients, AdamW state),
// the peak of activations held over the rank's action order, and communication buffers, with the
// device-memory check. No torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "plan/layout.hpp"
#include "plan/memory_estimate.hpp"
#include "schedule/action.hpp"

namespace ppctl::schedule {

/// The estimate for one pipeline rank (the same in every data-parallel replica), in bytes; with tensor parallelism
/// for one tp rank of it, the largest (tp rank 0, which holds the longest vocabulary shard).
struct RankMemory {
  int64_t rank = 0;
  int64_t parameters = 0;        ///< count, over the stages the rank holds (a tied head's copy included); one tp
                                 ///< rank's (plan::stage_parameters)
  int64_t tied = 0;              ///< of `parameters`, the tied embedding's copies (both ends of several stages):
                                 ///< the distributed optimizer keeps their AdamW state whole
  plan::StaticBytes fixed;       ///< weights, gradients, AdamW's state (plan::static_bytes under runtime.precision;
                                 ///< sharded with optimizer.distributed, dp > 1)
  int64_t activations = 0;       ///< the most held between two actions (plan::stage_activation_bytes
                                 ///< summed over the (stage, microbatch) pairs alive then, and the
                                 ///< outputs not yet sent): runtime::StepResult::kept_bytes
  int64_t in_flight = 0;         ///< the most (stage, microbatch) pairs alive at once (F until B / W)
  int64_t communication = 0;     ///< the most send and receive buffers alive at once, bytes
  int64_t buffers = 0;           ///< ... as a count of plan::p2p_bytes tensors
  int64_t sends = 0;             ///< the most send buffers alive at once (count)
  int64_t receives = 0;          ///< the most posted receive buffers alive at once (count)
  int64_t transient = 0;         ///< the most any one action allocates for its own duration
                                 ///< (plan::stage_transient_bytes)
  /// The most bytes above the step's start at any moment: activations held + send and receive
  /// buffers + the running action's transient bytes, taken together at each action of the walk (not
  /// the sum of the separate peaks): runtime::StepResult::peak_bytes. Gradient reduction buckets add
  /// nothing (the all-reduces run in place in the gradient buffer).
  int64_t peak = 0;
  /// fixed + peak: the rank's high-water mark of tensor memory.
  int64_t total() const { return fixed.total() + peak; }
};

/// When each send of `rank` is sure to have completed, from the program alone: a send to rank q is
/// taken by q's compute action that consumes it (F, or B / I of the neighbouring stage); once this
/// rank has received a later transfer that q posted after that action (the first of q's sends to
/// this rank that follows it in q's order), q has received the send, so waiting for it no longer
/// blocks on q. Returns, per position of `actions` (this rank's list, or any sub-list of it such as
/// the forward-only list evaluation runs, with the peers' lists filtered alike), the positions of
/// the sends that may be waited for right after that action has run (the action that consumes the
/// later transfer); sends with no such point are not listed anywhere (they wait at the step's end).
/// Works for any backend: Gloo offers no non-blocking test of a send's completion, so the executor
/// frees send buffers here. `keep` selects the actions of every rank that take part (all of them,
/// or e.g. only F / SEND_F / RECV_F); it must select exactly `actions` from the rank's program.
std::vector<std::vector<size_t>> send_release_points(const Program& program, int64_t rank, const RankProgram& actions,
                                                     bool (*keep)(const Action&) = nullptr);

/// Walks every rank's actions in order as runtime::Executor runs them: F adds the stage's
/// StageActivationBytes::kept, B removes it, I swaps it for `graph`, W removes that; a stage's output
/// (plan::boundary_bytes) counts from its F until its SEND_F (the executor then frees it, the send
/// buffer holding the bytes) or the next stage's F on this rank. A posted receive holds a
/// plan::p2p_bytes buffer until the F / B / I that consumes it; a send holds its buffer until the action
/// send_release_points names (as the executor releases it; on NCCL it may go earlier), or the step's
/// end. REDUCE_GRAD holds nothing (in place). Each compute action adds its plan::stage_transient_bytes
/// on top of the bytes held (F: after it, the larger of before and after; B, I, W: before it), which
/// gives RankMemory::peak. Returns one entry per rank of `program`, whose stages
/// `layout` describes.
std::vector<RankMemory> estimate_memory(const config::JobSpec& spec, const plan::Layout& layout,
                                        const Program& program);

/// send_release_points(program, r, program.ranks[r]) for every rank r, in rank order: the part of
/// estimate_memory that depends on the program alone (most of its time at scale).
using ReleasePoints = std::vector<std::vector<std::vector<size_t>>>;
ReleasePoints release_points(const Program& program);

/// estimate_memory with `released` = release_points(program) computed once, for a caller that estimates
/// the same program under several specs (`ppctl plan --tune`). Same result.
std::vector<RankMemory> estimate_memory(const config::JobSpec& spec, const plan::Layout& layout,
                                        const Program& program, const ReleasePoints& released);

/// Bytes each pipeline rank of `program` sends between ranks in one step: its SEND_F and SEND_B actions
/// times plan::p2p_bytes (same-rank hand-offs send nothing). What runtime::StepResult::sent_bytes
/// measures on that rank of each replica.
std::vector<int64_t> sent_bytes_per_step(const config::JobSpec& spec, const Program& program);

/// A variant of a job that fits runtime.device_memory_gib (fitting_configuration).
struct FittingConfiguration {
  config::JobSpec spec;                ///< the job with the changes applied
  std::vector<std::string> changes;    ///< the spec lines that select it, `pipeline: {tensor_parallel: 8, stages: 16}`
  int64_t largest = 0;                 ///< its largest rank's estimate_memory total, bytes
  int64_t world_size = 0;              ///< tp x dp x pp ranks it needs
};

/// The first variant of `spec` that fits runtime.device_memory_gib (none when it is 0), trying in this order:
/// the (tp, pp) shapes by ranks needed, fewest first, and at equal ranks the larger tp first (tensor parallelism
/// up to the GPUs of a node before more pipeline stages: Narayanan et al., arXiv 2104.04473 §3.3, takeaway 1),
/// tp over plan::tensor_parallel_sizes at or above the spec's (at most 8), pp = pipeline.stages x 1, 2, 4, ...
/// while layers allow; in each shape the spec's schedule then 1f1b, train.recompute from the spec's towards full
/// (none, blocks, full), optimizer.distributed as written then true (dp > 1). dp, precision and the micro batch
/// are kept; a variant the schedule's rules refuse is skipped. Each variant is laid out (job_program,
/// job_layout) and estimated as `ppctl plan` does.
std::optional<FittingConfiguration> fitting_configuration(const config::JobSpec& spec);

/// One warning for all the ranks of `ranks` (estimate_memory of `spec`, `layout`, `program`) whose total
/// exceeds runtime.device_memory_gib, or none (also when it is 0): "pp rank 3: estimated 90.2 GiB exceeds
/// runtime.device_memory_gib = 80 (fix: ...)" for one rank, "pp ranks 0-63: estimated 70.1 GiB to
/// 84.2 GiB (pp rank 0) exceed ..." for several (the ranks compressed by core::format_rank_list, the
/// smallest and largest estimate, the rank of the largest), so that a plan of hundreds of ranks says it
/// once. The fix names only the settings the spec can still change. First those that shrink the static
/// bytes, each with the largest rank's estimate_memory under it and "enough alone" when that brings
/// every rank under the limit: optimizer.distributed (dp > 1), runtime.precision bf16-params, and both
/// together (dp > 1, when neither alone is enough); then more stages, recompute, micro batch, and
/// runtime.precision bf16 from fp32; last, fitting_configuration's variant with its lines, ranks and largest rank
/// ("...; it fits with pipeline: {tensor_parallel: 8, stages: 16} (tp 8 x dp 8 x pp 16 = 1024 ranks): at most
/// 120.31 GiB per rank)").
std::vector<std::string> memory_warnings(const config::JobSpec& spec, const plan::Layout& layout,
                                         const Program& program, const std::vector<RankMemory>& ranks);

/// Logs memory_warnings (spdlog warn) for the job: what `ppctl train` says before workers start.
void log_memory_warnings(const config::JobSpec& spec, const plan::Layout& layout, const Program& program);

/// The plan's memory section for `ranks` (estimate_memory of `spec`, `layout`, `program`): a header that
/// states the static bytes per parameter of runtime.precision and optimizer.distributed (16 or 8 + 8/dp;
/// bf16-params 18 or 6 + 12/dp), one row per pipeline rank (GiB, MiB below 1 GiB, KiB below 1 MiB) and
/// the warnings (memory_warnings).
std::string format_memory(const config::JobSpec& spec, const plan::Layout& layout, const Program& program,
                          const std::vector<RankMemory>& ranks);

}  // namespace ppctl::schedule
