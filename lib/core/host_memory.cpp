// keep_freed_host_memory: glibc malloc's mmap and trim thresholds for worker processes.
#include "core/host_memory.hpp"

#include <fmt/format.h>

#include <climits>
#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ppctl::core {
namespace {

/// The environment variable that already tunes malloc, or nullptr.
const char* malloc_tuned_by_environment() {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"}) {
    if (std::getenv(name) != nullptr) return name;
  }
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) return "GLIBC_TUNABLES";
  return nullptr;
}

}  // namespace

HostMemorySetting keep_freed_host_memory() {
  if (const char* name = malloc_tuned_by_environment()) {
    return {false, fmt::format("host memory: malloc left as {} sets it", name)};
  }
#if defined(__GLIBC__)
  constexpr int kMmapThreshold = 32 << 20;  // glibc refuses more (HEAP_MAX_SIZE / 2 on 64-bit)
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) != 1 || mallopt(M_TRIM_THRESHOLD, INT_MAX) != 1) {
    return {false, "host memory: glibc refused malloc's thresholds; freed memory goes back to the kernel"};
  }
  return {true, "host memory: freed blocks up to 32 MiB are kept for reuse (malloc mmap threshold 32 MiB, "
                "trim threshold 2 GiB)"};
#else
  return {false, "host memory: not glibc; malloc left as it is"};
#endif
}

}  // namespace ppctl::core
