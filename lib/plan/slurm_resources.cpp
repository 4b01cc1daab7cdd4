// Slurm resource lines for a job spec (see slurm_resources.hpp).
#include "plan/slurm_resources.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/echo.hpp"

namespace ppctl::plan {

int64_t tasks_per_node(int64_t world_size, int64_t max_per_node) {
  for (int64_t g = std::min(world_size, max_per_node); g > 1; --g) {
    if (world_size % g == 0) return g;
  }
  return 1;
}

std::string format_slurm_resources(const config::JobSpec& spec, int64_t world_size) {
  const int64_t threads = spec.runtime.threads_per_worker;
  // Quoted for the shell: the lines are pasted as they are, and a path may hold spaces or quotes.
  const std::string job = spec.source.empty() ? std::string("JOB.yaml") : core::shell_word(spec.source);
  if (spec.runtime.device == config::Device::Cuda) {
    // GPUs per node: the most up to 8 that divide the world and hold whole tensor-parallel groups.
    const int64_t t = std::max<int64_t>(spec.pipeline.tensor_parallel, 1);
    const int64_t g = t * tasks_per_node(world_size / t, std::max<int64_t>(8 / t, 1));
    const int64_t nodes = world_size / g;
    return fmt::format(
        "sbatch --nodes={0} --ntasks-per-node={1} --gpus-per-node={1} --cpus-per-task={2} "
        "scripts/slurm/gpu.sbatch {3}\n"
        "           srun --nodes={0} --ntasks-per-node={1} --gpus-per-node={1} --cpus-per-task={2} "
        "ppctl train {3}   ({4} tasks, one GPU each; any nodes x GPUs per node = {4})\n",
        nodes, g, threads, job, world_size);
  }
  const int64_t t = std::max<int64_t>(spec.pipeline.tensor_parallel, 1);  // whole tp groups on a node
  return fmt::format(
      "sbatch --nodes=1 --ntasks={0} --cpus-per-task={1} scripts/slurm/cpu.sbatch {2}\n"
      "           srun --ntasks={0} --cpus-per-task={1} ppctl train {2}   ({0} tasks; on N nodes: "
      "--nodes=N --ntasks-per-node={0}/N{3})\n",
      world_size, threads, job, t > 1 ? fmt::format(", a multiple of tensor_parallel {}", t) : "");
}

}  // namespace ppctl::plan
