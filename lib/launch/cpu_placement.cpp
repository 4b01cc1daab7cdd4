// place_workers and usable_cpus: sched_getaffinity and a split of the mask among the workers.
#include "launch/cpu_placement.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <cstdint>

#include "core/rank_list.hpp"

namespace ppctl::launch {

std::vector<int> usable_cpus() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  return cpus;
}

CpuPlacement place_workers(const std::vector<int>& cpus, int workers, int threads_per_worker, bool bind) {
  CpuPlacement out;
  if (cpus.empty() || workers < 1 || threads_per_worker < 1) return out;
  const int64_t threads = static_cast<int64_t>(workers) * threads_per_worker;
  const auto available = static_cast<int64_t>(cpus.size());
  if (threads > available) {
    out.oversubscribed = fmt::format(
        "{} workers x runtime.threads_per_worker {} = {} threads, more than the {} this process may use "
        "(CPUs {}): the workers are left unbound, they will contend for the cores and every stage slows (fix: {}, "
        "or widen the CPU mask ppctl runs under)",
        workers, threads_per_worker, threads, available == 1 ? std::string("1 CPU") : fmt::format("{} CPUs", available),
        core::format_rank_list(std::vector<int64_t>(cpus.begin(), cpus.end())),
        available / workers >= 1
            ? fmt::format("runtime.threads_per_worker {}, or fewer workers on this machine", available / workers)
            : std::string("fewer stages or data-parallel replicas on this machine, or a machine with more CPUs"));
    return out;
  }
  if (!bind) return out;
  for (int r = 0; r < workers; ++r) {
    const auto first = cpus.begin() + static_cast<std::ptrdiff_t>(r) * threads_per_worker;
    out.per_worker.emplace_back(first, first + threads_per_worker);
  }
  return out;
}

}  // namespace ppctl::launch
