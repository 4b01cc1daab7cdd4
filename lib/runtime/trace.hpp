// Trace of what ran: each rank records the actions it executed (compute, sends and receives posted,
// waits) with timestamps, as one JSON part per rank (observe/trace_merge.hpp merges the parts into one
// Chrome-trace/Perfetto JSON). No torch.
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
    Wait,     ///< blocked on a receive: `wait 1RECV_F3`; on the step's sends: `wait sends`; a forward
              ///< on the distributed optimizer's updated weights: `wait parameter all-gather`
    Step,     ///< a whole step's schedule (encloses the slices above): `step 3`
    Phase,    ///< anything else the loop times (e.g. `optimizer`): named by `label`
    /// A stage's data-parallel gradient reduction running beside the schedule, from its REDUCE_GRAD
    /// to when its last collective was seen complete: `1REDUCE_GRAD`, category `reduce` (the merged
    /// trace puts it on the track "rank R collectives").
    Collective,
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

/// Wall-clock microseconds since the Unix epoch, now.
int64_t wall_clock_us();

}  // namespace ppctl::runtime
