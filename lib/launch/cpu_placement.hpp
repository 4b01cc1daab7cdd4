// Where the local launcher's workers run: the CPUs this process may use, split among the workers. No torch.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ppctl::launch {

/// The CPUs this process may run on (its affinity mask, sched_getaffinity), ascending. Empty if the
/// mask cannot be read.
std::vector<int> usable_cpus();

/// What the local launcher does with `workers` workers of `threads_per_worker` intra-op threads each on
/// `cpus` (usable_cpus()).
struct CpuPlacement {
  /// Per worker (by rank), the CPUs it is bound to; empty when workers are not bound (binding off, or
  /// the threads do not fit).
  std::vector<std::vector<int>> per_worker;
  /// Set when workers x threads_per_worker exceed the CPUs: names both numbers, the mask and the fix.
  std::optional<std::string> oversubscribed;
};

/// `bind`: runtime.cpu_binding cores. When workers x threads_per_worker <= cpus.size(), with `bind`
/// worker r gets cpus[r * T .. r * T + T - 1] (T = threads_per_worker), consecutive in the mask, so
/// that no two workers share a CPU (torchrun's --numa-binding and srun --cpu-bind=cores do likewise).
/// Otherwise nothing is bound and `oversubscribed` says so: oversubscribed intra-op threads (one
/// spinning per core they cannot get) slow every stage, which the pipeline then waits on.
CpuPlacement place_workers(const std::vector<int>& cpus, int workers, int threads_per_worker, bool bind);

}  // namespace ppctl::launch
