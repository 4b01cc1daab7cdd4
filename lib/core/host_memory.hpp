// Host memory of a worker process: keep what a training step frees for the next step, instead of
// handing it back to the operating system and faulting every page in again (glibc malloc).
#pragma once

#include <string>

namespace ppctl::core {

/// What keep_freed_host_memory() did, for the worker's log.
struct HostMemorySetting {
  bool applied = false;     ///< true: ppctl set malloc's thresholds; false: left as they were
  std::string description;  ///< one line saying which, and why
};

/// Makes glibc's malloc keep the memory a worker frees, so that the next step reuses it.
///
/// Why: by default glibc serves blocks above its mmap threshold (128 KiB at first, then raised to
/// the largest block freed so far) with mmap and unmaps them on free, and gives the top of its heap
/// back to the kernel once more than the trim threshold (twice the mmap threshold) lies free there
/// (see mallopt(3): M_MMAP_THRESHOLD, M_TRIM_THRESHOLD). A training step frees all of its
/// activations after its last backward, so the next step touches fresh pages: each costs a page
/// fault and the kernel zeroes it. Measured (docs/benchmarks.md, "page faults every step"): the
/// small GPT of scripts/bench/vs_torch.py under GPipe at 2 stages took about 60,000 page faults per
/// step and its forwards were 30% slower than the same forwards in torch.distributed.pipelining's
/// Python processes; with this setting about 22,000 per step, start-up included. A caching
/// allocator does the same on GPUs (CUDA's); PyTorch's CPU performance guide recommends one
/// (jemalloc, tcmalloc) for this reason.
///
/// What: M_MMAP_THRESHOLD = 32 MiB (glibc's largest; blocks up to that come from the heap and stay
/// there when freed) and M_TRIM_THRESHOLD = INT_MAX (the heap keeps up to ~2 GiB free at its top).
/// The process's peak resident set does not grow from this: freed memory is reused, only no longer
/// returned between steps. Blocks above 32 MiB are still mapped and unmapped each time.
///
/// Left alone (applied = false) when the environment already tunes malloc: MALLOC_MMAP_THRESHOLD_,
/// MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_ or a glibc.malloc entry in GLIBC_TUNABLES is set, or the
/// C library is not glibc. Any of the first three also fixes its threshold and so stops glibc's own
/// raising of them; `GLIBC_TUNABLES=glibc.malloc.tcache_count=7` (glibc's default value) leaves
/// malloc exactly as glibc starts it, to measure without this setting.
/// Process-wide; call it once, early in a worker (before its first step). Throws nothing.
HostMemorySetting keep_freed_host_memory();

}  // namespace ppctl::core
