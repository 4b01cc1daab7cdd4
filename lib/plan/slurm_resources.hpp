// The Slurm resource request a job spec needs (`ppctl plan` prints it). Pure functions; no torch.
#pragma once

#include <cstdint>
#include <string>

#include "config/job_spec.hpp"

namespace ppctl::plan {

/// Tasks per node for `world_size` ranks on nodes of at most `max_per_node` GPUs: the largest
/// divisor of world_size that is <= max_per_node (so every node gets the same number of tasks).
int64_t tasks_per_node(int64_t world_size, int64_t max_per_node);

/// Two lines for `world_size` = dp x pp ranks, one Slurm task each, runtime.threads_per_worker CPUs
/// per task:
/// - cpu: `sbatch --nodes=1 --ntasks=W --cpus-per-task=T scripts/slurm/cpu.sbatch SPEC` and the
///   matching `srun` line (more nodes: any --nodes=N --ntasks-per-node=W/N, a multiple of pipeline.tensor_parallel);
/// - cuda: `sbatch --nodes=N --ntasks-per-node=G --gpus-per-node=G --cpus-per-task=T
///   scripts/slurm/gpu.sbatch SPEC` with G = t x tasks_per_node(W / t, 8 / t) (whole tensor-parallel groups of t on a
///   node), one GPU per task.
std::string format_slurm_resources(const config::JobSpec& spec, int64_t world_size);

}  // namespace ppctl::plan
