// Data parallel x pipeline parallel: the data-parallel size, the rank <-> (dp rank, pp rank)
// mapping and the process groups each rank belongs to. Pure functions; no torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"

namespace ppctl::plan {

/// Where one global rank sits: replica `dp` (data-parallel rank) and pipeline rank `pp`.
struct RankCoords {
  int64_t dp = 0;
  int64_t pp = 0;
};

/// The data-parallel size of a job. `world_size` is the number of workers when something else
/// started them (torchrun, Slurm), unset for the local launcher. pipeline.data_parallel 0 means
/// WORLD_SIZE / pipeline.stages (external) or 1 (local); a non-zero value must give
/// dp x stages = WORLD_SIZE. Throws ppctl::PlanError naming WORLD_SIZE, pipeline.stages and
/// pipeline.data_parallel with their values when they disagree.
int64_t resolve_data_parallel(const config::JobSpec& spec, std::optional<int64_t> world_size);

/// rank = pp x dp_size + dp: the pipeline rank is outermost, so the replicas of one stage are
/// neighbours (Megatron-LM's order, pipeline groups span the nodes, arXiv 2104.04473 §3).
int64_t global_rank(RankCoords coords, int64_t dp_size);
/// The inverse of global_rank.
RankCoords rank_coords(int64_t rank, int64_t dp_size);

/// How records that hold replica 0 only (metrics, traces, timelines) name pipeline rank `pp`: "rank P" when
/// dp_size is 1, else "rank G (pipeline rank P of replica 0)" with G its global rank, as the rank logs name it.
std::string replica0_rank_name(int64_t pp, int64_t dp_size);

/// The global ranks of replica `dp`'s pipeline, by pipeline rank (its p2p group).
std::vector<int64_t> pipeline_group(int64_t dp, int64_t dp_size, int64_t pp_size);
/// The global ranks holding pipeline rank `pp` in every replica, by dp rank (its gradient
/// all-reduce group).
std::vector<int64_t> data_parallel_group(int64_t pp, int64_t dp_size, int64_t pp_size);

/// "dp 2 x pp 2 = 4 ranks: rank = pp_rank x 2 + dp_rank" and one line per pipeline listing its ranks
/// (compressed by format_rank_list: `ranks 0-1008:16`).
std::string format_rank_mapping(int64_t dp_size, int64_t pp_size);

}  // namespace ppctl::plan
