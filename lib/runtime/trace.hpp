// Trace of what ran: each rank records the actions it executed (compute, sends and receives posted,
// waits) with timestamps; the launcher merges the ranks' parts into one Chrome-trace/Perfetto JSON.
// No torch.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "schedule/action.hpp"

namespace ppctl::runtime {

/// Records one rank's executed actions for the first `max_steps` steps of a run.
///
/// Clocks: slices are timed with std::chrono::steady_clock (monotonic, immune to clock changes
/// during the run). At construction the recorder reads steady_clock and system_clock back to back
/// and from then on maps every steady time to wall-clock microseconds since the Unix epoch through
/// that one pair. Ranks on one machine share the system clock, so their parts line up to within the
/// pairing error (about a microsecond) plus any NTP slew during the run; ranks on different
/// machines line up only as well as the machines' clocks are synchronised (NTP: typically well
/// under a millisecond on a LAN).
///
/// Off (max_steps == 0, or a step at or past max_steps) every call returns at once without reading
/// a clock or allocating: callers check `active(step)` before timing anything.
class TraceRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  /// What a slice shows.
  enum class Kind {
    Compute,  ///< F, B, I or W: named like `1F3`, from the end of its receive wait to its end
    Post,     ///< posting a SEND_* or RECV_* (non-blocking): `1SEND_F3`
    Wait,     ///< blocked on a receive: `wait 1RECV_F3`; or on the step's sends: `wait sends`
    Step,     ///< a whole step's schedule (encloses the slices above): `step 3`
    Phase,    ///< anything else the loop times (e.g. `optimizer`): named by `label`
  };

  /// `rank`: the track this part fills. `max_steps`: steps recorded, counted from step 0; 0 = off.
  TraceRecorder(int rank, int64_t max_steps);

  /// Whether step `step` (from 0) is recorded.
  bool active(int64_t step) const { return step >= 0 && step < max_steps_; }

  /// Records one slice of step `step` from `start` to `end`. `action` names Compute, Post and Wait
  /// slices; `label` names Phase slices. Ignored unless active(step).
  void add(Kind kind, int64_t step, const schedule::Action& action, Clock::time_point start,
           Clock::time_point end, const char* label = "");

  /// Slices recorded so far.
  size_t size() const { return slices_.size(); }

  /// This rank's part as a complete Chrome trace: {"traceEvents": [...], "ppctl": {"rank": R,
  /// "clock": "wall-clock microseconds since the Unix epoch"}}, one "X" (complete) event per slice on
  /// pid 0, tid = rank, `ts` and `dur` in microseconds (ts since the Unix epoch).
  std::string to_json() const;

  /// Writes to_json() to `path` (through a temporary file, renamed). Throws ppctl::Error naming the
  /// path when it cannot be written.
  void write(const std::string& path) const;

 private:
  struct Slice {
    Kind kind;
    int64_t step;
    schedule::Action action;
    Clock::time_point start, end;
    const char* label;
  };
  int rank_;
  int64_t max_steps_;
  Clock::time_point steady_anchor_;
  int64_t wall_anchor_us_;  // system_clock at steady_anchor_, microseconds since the Unix epoch
  std::vector<Slice> slices_;
};

/// The file name of rank `rank`'s trace part in a run directory: `trace.rank<R>.json`.
std::string trace_part_name(int rank);

/// What merge_trace_parts found.
struct TraceMerge {
  std::string path;                ///< the merged trace written
  std::vector<int> ranks_merged;   ///< ranks whose part was read
  std::vector<int> ranks_missing;  ///< ranks without a (readable) part, e.g. a rank that was killed
  size_t events = 0;               ///< complete events in the merged trace
};

/// Merges the parts `run_dir/trace.rank<R>.json` of ranks 0..world_size-1 into `run_dir/trace.json`:
/// the same layout as `ppctl plan --trace` (schedule::to_chrome_trace): pid 0, one track (tid) per
/// rank named "rank R", complete ("X") events, `ts`/`dur` in microseconds, here from `origin_us`
/// (wall-clock microseconds since the Unix epoch: the launcher's start) so the timeline starts at
/// launch. A part that is missing or unreadable is skipped and listed in ranks_missing (its track is
/// still named); merged parts are removed. Writes nothing and returns an empty path when no part
/// exists. Throws ppctl::Error when trace.json cannot be written.
TraceMerge merge_trace_parts(const std::string& run_dir, int world_size, int64_t origin_us);

/// Wall-clock microseconds since the Unix epoch, now.
int64_t wall_clock_us();

}  // namespace ppctl::runtime
