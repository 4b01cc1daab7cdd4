// The rank grid: every global rank's coordinates along the job's parallel axes, and the process groups along each
// axis. The one place an axis is added. Pure functions; no torch.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ppctl::plan {

/// A parallel axis of the grid. Listed fastest-varying first: the ranks of a tensor-parallel group are adjacent
/// (the GPUs of one node), then the data-parallel replicas of one pipeline rank, then the pipeline ranks
/// outermost (Megatron-Core's default order "tp-dp-pp", megatron/core/parallel_state.py's RankGenerator;
/// pipeline groups span the nodes, arXiv 2104.04473 §3).
enum class Axis { tensor = 0, data = 1, pipeline = 2 };

/// The axes in grid order, fastest first.
inline constexpr std::array<Axis, 3> kAxesFastestFirst = {Axis::tensor, Axis::data, Axis::pipeline};

/// The axis's short name as the field (tp, dp, pp) and in group names.
const char* axis_name(Axis axis);

/// Where one global rank sits: tensor-parallel rank `tp`, data-parallel rank (replica) `dp`, pipeline rank `pp`.
/// Fields in grid order, fastest first, as `{tp, dp, pp}` initialisers list them.
struct RankCoords {
  int64_t tp = 0;
  int64_t dp = 0;
  int64_t pp = 0;
  int64_t at(Axis axis) const;
  int64_t& at(Axis axis);
  bool operator==(const RankCoords& o) const { return tp == o.tp && dp == o.dp && pp == o.pp; }
};

/// A tp x dp x pp grid of ranks, ordered as kAxesFastestFirst:
/// rank = (pp x dp_size + dp) x tp_size + tp.
class RankGrid {
 public:
  /// Sizes of each axis, every one >= 1 (else ppctl::PlanError naming the axis and value).
  RankGrid(int64_t tp_size, int64_t dp_size, int64_t pp_size);

  int64_t size(Axis axis) const { return sizes_[static_cast<size_t>(axis)]; }
  int64_t world_size() const { return sizes_[0] * sizes_[1] * sizes_[2]; }

  /// The coordinates of global rank `rank` (0 <= rank < world_size, else a bug).
  RankCoords coords(int64_t rank) const;
  /// The global rank at `coords` (each coordinate within its axis's size, else a bug). Inverse of coords.
  int64_t rank(RankCoords coords) const;

  /// The ranks that share every coordinate of `rank` but the one along `axis`, ordered by that coordinate
  /// (so the group rank of a member is its coordinate on `axis`). Its size is size(axis).
  std::vector<int64_t> group(Axis axis, int64_t rank) const;
  /// Every group along `axis`, by their lowest member: a partition of the ranks into world_size / size(axis)
  /// groups.
  std::vector<std::vector<int64_t>> groups(Axis axis) const;

  /// "tp 2 x dp 2 x pp 4 = 16 ranks; rank = (pp_rank x 2 + dp_rank) x 2 + tp_rank"; axes of size 1 are left out
  /// of both sides ("pp 4 = 4 ranks; rank = pp_rank").
  std::string describe() const;

 private:
  std::array<int64_t, 3> sizes_;
};

}  // namespace ppctl::plan
