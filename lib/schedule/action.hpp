// The schedule IR: one action = {kind, stage, microbatch}; a rank's program is a list of actions.
// Text form as in torch.distributed.pipelining: `1F3`, `0B2`, `2SEND_F0`, `1RECV_B4`, `1REDUCE_GRAD`.
// No torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ppctl::schedule {

/// What an action does. Compute kinds run a stage; transfer kinds move one tensor between two ranks;
/// REDUCE_GRAD starts a collective over a stage's data-parallel replicas. Code indexes arrays by the
/// first four (compute) kinds: new kinds go last.
enum class ActionKind {
  F,       ///< forward of (stage, microbatch)
  B,       ///< full backward of (stage, microbatch)
  I,       ///< input-gradient-only backward (zero bubble, arXiv 2401.10241 §2): communicates like B
  W,       ///< weight-gradient-only backward: after I of the same (stage, microbatch), no transfer
  SEND_F,  ///< send stage's output activation for microbatch to the rank of stage+1
  RECV_F,  ///< post the receive of stage's input activation for microbatch from the rank of stage-1
  SEND_B,  ///< send the gradient w.r.t. stage's input (from B or I) to the rank of stage-1
  RECV_B,  ///< post the receive of the gradient w.r.t. stage's output for microbatch from stage+1
  REDUCE_GRAD,  ///< start the data-parallel gradient reduction of `stage`: every B/I/W of the stage in
                ///< this step is done (torch.distributed.pipelining's REDUCE_GRAD); no microbatch (0)
};

struct Action {
  ActionKind kind = ActionKind::F;
  int64_t stage = 0;       ///< stage index in [0, num_stages)
  int64_t microbatch = 0;  ///< microbatch index in [0, num_microbatches); 0 for REDUCE_GRAD

  bool operator==(const Action& other) const {
    return kind == other.kind && stage == other.stage && microbatch == other.microbatch;
  }
  bool operator!=(const Action& other) const { return !(*this == other); }
};

/// True for F, B, I, W.
bool is_compute(ActionKind kind);
/// True for SEND_F, SEND_B.
bool is_send(ActionKind kind);
/// True for RECV_F, RECV_B.
bool is_recv(ActionKind kind);
/// True for REDUCE_GRAD.
bool is_reduce(ActionKind kind);

/// `F`, `B`, `I`, `W`, `SEND_F`, `RECV_F`, `SEND_B`, `RECV_B`, `REDUCE_GRAD`.
std::string to_string(ActionKind kind);
/// `{stage}{kind}{microbatch}`, e.g. `1F3`, `0SEND_B2`; `{stage}REDUCE_GRAD` (no microbatch), e.g.
/// `1REDUCE_GRAD`.
std::string to_string(const Action& action);
/// Inverse of to_string(Action) (REDUCE_GRAD gets microbatch 0). Throws ppctl::ScheduleError naming
/// the text and the expected form, also for a microbatch after REDUCE_GRAD.
Action parse_action(std::string_view text);

/// The other end of a transfer: SEND_F(s,j) <-> RECV_F(s+1,j), SEND_B(s,j) <-> RECV_B(s-1,j).
/// Throws ppctl::ScheduleError for a compute action or REDUCE_GRAD (not transfers), or an end with no
/// neighbouring stage (stage < 0).
Action matching_transfer(const Action& comm);

/// One rank's ordered actions for one step.
using RankProgram = std::vector<Action>;

/// Every rank's program for one training step, plus the geometry needed to read it.
struct Program {
  int64_t num_stages = 0;              ///< p (total stages, counting virtual stages)
  int64_t num_microbatches = 0;        ///< m
  std::vector<int64_t> stage_to_rank;  ///< size num_stages: which rank runs each stage
  std::vector<RankProgram> ranks;      ///< size = number of ranks
  int64_t num_ranks() const { return static_cast<int64_t>(ranks.size()); }
};

/// Parses space-separated action text (the inverse of format_rank(program, false)), e.g.
/// `0F0 0SEND_F0 0F1`. Empty or all-blank text gives an empty program. Throws like parse_action.
RankProgram parse_rank(std::string_view text);

/// The compute action of a neighbouring stage whose output `compute` consumes:
/// F(s,j) <- F(s-1,j) for s > 0 (activation); B(s,j) <- B(s+1,j) and I(s,j) <- I(s+1,j) for s < p-1
/// (gradient); none otherwise, and none for W. A program may split the backward of some stages and
/// not of others: the gradient of stage s+1 then comes from whichever of B(s+1,j) / I(s+1,j) it has
/// (validate() accepts either). Within one stage B and I also need F(s,j), and W(s,j) needs I(s,j);
/// those are not neighbours and not returned here. Throws ppctl::ScheduleError for a transfer or
/// REDUCE_GRAD (not compute actions).
std::optional<Action> upstream_compute(const Action& compute, int64_t num_stages);

/// The RECV that `compute` waits for: RECV_F(s,j) for F, RECV_B(s,j) for B and I, when the upstream
/// stage runs on another rank (program.stage_to_rank); none when there is no upstream stage, it
/// runs on the same rank, or `compute` is W. Throws ppctl::ScheduleError when `compute` is a transfer
/// or REDUCE_GRAD.
std::optional<Action> input_transfer(const Action& compute, const Program& program);

/// The SEND that follows `compute`: SEND_F(s,j) for F when stage s+1 runs on another rank, SEND_B(s,j)
/// for B or I when stage s-1 runs on another rank; none otherwise (never for W). Throws like
/// input_transfer.
std::optional<Action> output_transfer(const Action& compute, const Program& program);

/// Space-separated text of one rank's actions, e.g. `0F0 0F1 0B0 0F2 ...`. With `compute_only`,
/// transfers and REDUCE_GRAD are left out and the stage prefix is dropped when the rank runs one stage
/// (`F0 F1 B0 ...`).
std::string format_rank(const RankProgram& program, bool compute_only);

/// Message tag for the transfer an action belongs to (a SEND and its matching RECV get the same tag):
/// unique per (receiving stage, microbatch, direction) within a step, >= 0 (Gloo requires it).
int64_t message_tag(const Action& action, int64_t num_microbatches);

}  // namespace ppctl::schedule
