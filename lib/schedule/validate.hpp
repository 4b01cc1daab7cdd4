// Schedule validator: dependency checks and a simulation of blocking semantics (no deadlock).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "schedule/action.hpp"

namespace ppctl::schedule {

/// Checks a program with communication:
/// - each F(s,j) appears exactly once, and the backward of (s,j) either as one B(s,j) or split into
///   one I(s,j) and one W(s,j) (zero bubble, arXiv 2401.10241), all on the rank stage_to_rank[s];
/// - on its rank, F(s,j) comes before B(s,j) / I(s,j), and I(s,j) before W(s,j);
/// - every SEND has exactly one matching RECV on the peer rank (same stage pairing, microbatch,
///   direction) and vice versa; stages on one rank exchange tensors locally, without any;
/// - simulating the executor's semantics (SEND and RECV never block; F(s,j), s>0 waits for
///   SEND_F(s-1,j) to have been issued and its own RECV_F(s,j) posted; B or I of (s,j), s<p-1 waits
///   likewise for SEND_B(s+1,j) (sent after B or I of stage s+1) and RECV_B(s,j); B or I of
///   (p-1,j) needs F(p-1,j); W(s,j) needs I(s,j)), every rank reaches its end;
/// - REDUCE_GRAD is optional per stage (without one the stage is reduced after the schedule), but at
///   most one per stage, with microbatch 0, on the rank stage_to_rank[s], after every B, I and W of
///   the stage; it never blocks (it only starts an asynchronous collective).
/// Throws ppctl::ScheduleError with the rule broken and the rank x action grid (format_grid),
/// marking where each rank stood, when any check fails.
void validate(const Program& program);

/// A `positions` entry that leaves its rank unmarked in format_grid (used when an error concerns
/// one action rather than where every rank stood). Ranks beyond positions.size() are unmarked too.
inline constexpr size_t kUnmarked = static_cast<size_t>(-1);

/// The rank x action grid, one line per rank: `rank 0: 0F0 0SEND_F0 ...`; when `positions` is
/// non-empty, the action each rank stands at is wrapped in `[ ]` (a rank past its end gets `[end]`).
std::string format_grid(const Program& program, const std::vector<size_t>& positions = {});

}  // namespace ppctl::schedule
