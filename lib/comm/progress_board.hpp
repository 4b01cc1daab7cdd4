// Per-rank progress published through the job's rendezvous store (key ppctl/progress/<rank>), so
// the launcher can name the rank that stopped making progress and what it was last doing
// (issue 12, fault 3). The header is torch-free; the publisher's c10d client is in the .cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/launch_env.hpp"

namespace ppctl::comm {

/// The store key of rank `rank`'s progress record: "ppctl/progress/<rank>".
std::string progress_key(int rank);

/// What a rank is doing, as its training loop sets it (phase) around the schedule.
enum class Phase : int {
  Starting = 0,   ///< set-up, before step 1 (or the resumed step)
  Schedule,       ///< running the step's pipeline schedule (position = action index)
  GradientSync,   ///< data-parallel average, tied embeddings, global gradient norm
  Optimizer,      ///< learning rate and AdamW step
  Eval,           ///< held-out evaluation
  Checkpoint,     ///< writing a checkpoint
  Finishing,      ///< after the last step: trace, metrics, final barrier
};

/// "schedule", "optimizer step", ... for messages.
const char* phase_name(Phase phase);

/// Where a rank is: written by the training loop on every action (relaxed atomic stores, no
/// system call), read by the ProgressPublisher's thread.
struct ProgressCursor {
  std::atomic<int64_t> step{0};      ///< optimizer step being run, from 1 (0 before the first)
  std::atomic<int> phase{0};         ///< a Phase
  std::atomic<int64_t> position{0};  ///< with Phase::Schedule: index of the action in the rank's program
};

/// One rank's published record. Times are wall-clock seconds since the Unix epoch (the launcher and
/// its workers share a clock).
struct ProgressRecord {
  int64_t step = 0;       ///< as ProgressCursor::step
  std::string action;     ///< e.g. "schedule, action 5 of 16 (1F2)" or "optimizer step"
  double since_s = 0.0;   ///< when the rank entered this step/phase/action
  double beat_s = 0.0;    ///< when the record was published (every ProgressPublisher interval)
};

/// JSON text of `record` ({"step", "action", "since", "beat"}).
std::string encode_progress(const ProgressRecord& record);
/// The record in `text`; nullopt when it is not one (never throws).
std::optional<ProgressRecord> decode_progress(const std::string& text);

/// A rank that stopped making progress.
struct Stall {
  int rank = 0;
  ProgressRecord last;  ///< its last published record
  double silent_s = 0;  ///< now - last.beat_s
};

/// Among `running` ranks, the one whose record (records[rank]; nullopt: none published yet) has not
/// been refreshed for more than `stale_after_s` at time `now_s`, the longest silent first; nullopt
/// when every running rank with a record is still publishing. A stopped (SIGSTOP) or frozen process
/// stops publishing; one merely waiting for a peer goes on.
std::optional<Stall> find_stall(const std::vector<std::optional<ProgressRecord>>& records,
                                const std::vector<int>& running, double now_s, double stale_after_s);

/// "no progress report for 4.2 s; last seen in step 3, schedule, action 5 of 16 (1F2)".
std::string describe_stall(const Stall& stall);

/// How often a publisher refreshes its record, and after how long without a refresh the launcher
/// calls a rank stalled (8 missed refreshes: far above scheduling delays on a loaded machine, far
/// below any useful runtime.comm_timeout_s).
inline constexpr std::chrono::milliseconds kProgressInterval{250};
inline constexpr double kStaleAfterSeconds = 2.0;

/// Wall-clock seconds since the Unix epoch.
double wall_clock_s();

/// Publishes `cursor` as rank `info.rank`'s record every kProgressInterval from its own thread,
/// over its own TCPStore client of the store at info.master_addr:info.master_port (which must
/// exist: create it after the process groups). The hot path only writes the cursor's atomics.
/// A store that goes away ends publishing silently (the job is ending). `describe(position)` names
/// the schedule action at `position` (e.g. "1F2"), called on the publisher's thread.
class ProgressPublisher {
 public:
  /// Throws ppctl::CommError when the store cannot be reached within `timeout`.
  ProgressPublisher(const RendezvousInfo& info, std::chrono::milliseconds timeout,
                    const ProgressCursor& cursor, std::function<std::string(int64_t)> describe,
                    int64_t actions_per_step);
  ~ProgressPublisher();  ///< stops the thread (after at most one interval)
  ProgressPublisher(const ProgressPublisher&) = delete;
  ProgressPublisher& operator=(const ProgressPublisher&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ppctl::comm
