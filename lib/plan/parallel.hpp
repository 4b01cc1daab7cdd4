// Data parallel x pipeline parallel: the data-parallel size a launch gives, and how the plan and the records name
// the ranks of the grid (plan/rank_grid.hpp). Pure functions; no torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "plan/rank_grid.hpp"

namespace ppctl::plan {

/// The data-parallel size of a job. `world_size` is the number of workers when something else
/// started them (torchrun, Slurm), unset for the local launcher. pipeline.data_parallel 0 means
/// WORLD_SIZE / (tensor_parallel x stages) (external) or 1 (local); a non-zero value must give
/// tensor_parallel x dp x stages = WORLD_SIZE. Throws ppctl::PlanError naming WORLD_SIZE, pipeline.stages,
/// pipeline.tensor_parallel (when above 1) and pipeline.data_parallel with their values when they disagree.
/// `world_name` names the world size in messages: WORLD_SIZE (torchrun), SLURM_NTASKS (Slurm).
int64_t resolve_data_parallel(const config::JobSpec& spec, std::optional<int64_t> world_size,
                              const std::string& world_name = "WORLD_SIZE");

/// A tensor-parallel group is t adjacent ranks (plan/rank_grid.hpp) and must sit on one node, where its
/// all-reduces run (Megatron-LM, arXiv 2104.04473 §3.3). `ranks_per_node`: the workers on each node as the
/// launcher says, `source` the variable that says it ("SLURM_STEP_TASKS_PER_NODE=3,1", "LOCAL_WORLD_SIZE=4"); empty
/// when it does not say, then nothing is checked. Throws ppctl::PlanError naming pipeline.tensor_parallel, the
/// variable and the counts when t does not divide every node's count (a count below t included).
void check_tensor_parallel_per_node(const config::JobSpec& spec, const std::vector<int>& ranks_per_node,
                                    const std::string& source);

/// How records that hold replica 0 only (metrics, traces, timelines) name pipeline rank `pp`: "rank P" when the
/// grid has no other axis, else "rank G (pipeline rank P of replica 0)" with G the global rank of its first member
/// (tp rank 0, dp rank 0), as the rank logs name it.
std::string replica0_rank_name(int64_t pp, const RankGrid& grid);

/// The grid's line (RankGrid::describe) and one line per pipeline listing its ranks, compressed by
/// format_rank_list ("replica 15: ranks 15-1023:16 (pp rank 0..63)"). With tp > 1 a line of the tp groups
/// ("tp groups: 128 of 8 adjacent ranks, 0-7, 8-15, ..., 1016-1023 ...") and one line per replica naming the tp
/// group of each pipeline rank ("replica 1: tp groups 8-15, 72-79, ..., 968-975 (pp rank 0..15)"), the first two
/// and the last where there are more than 4.
std::string format_rank_mapping(const RankGrid& grid);

}  // namespace ppctl::plan
