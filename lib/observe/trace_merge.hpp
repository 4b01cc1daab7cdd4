// Merging the ranks' trace parts (runtime/trace.hpp writes one per rank) into one Chrome trace of the run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ppctl::observe {

/// What merge_trace_parts found.
struct TraceMerge {
  std::string path;                ///< the merged trace written
  std::vector<int> ranks_merged;   ///< ranks whose part was read
  std::vector<int> ranks_missing;  ///< ranks without a (readable) part, e.g. a rank that was killed
  size_t events = 0;               ///< complete events in the merged trace
};

/// Merges the parts `run_dir/trace.rank<R>.json` of pipeline ranks 0..world_size-1 into `run_dir/trace.json`:
/// the same layout as `ppctl plan --trace` (schedule::to_chrome_trace): pid 0, one track (tid) per
/// pipeline rank named "rank R" (plan::replica0_rank_name: with data_parallel or tensor_parallel > 1 only tp rank 0 of
/// replica 0 traces, and its track names give the global ranks that the rank logs use, "rank 2 (pipeline rank 1 of
/// replica 0)"), complete ("X") events, `ts`/`dur` in microseconds, here from `origin_us`
/// (wall-clock microseconds since the Unix epoch: the launcher's start) so the timeline starts at
/// launch. A part that is missing or unreadable is skipped and listed in ranks_missing (its track is
/// still named); merged parts are removed. Writes nothing and returns an empty path when no part
/// exists. Throws ppctl::Error when trace.json cannot be written.
TraceMerge merge_trace_parts(const std::string& run_dir, int world_size, int64_t origin_us,
                             int64_t data_parallel = 1, int64_t tensor_parallel = 1);


}  // namespace ppctl::observe
