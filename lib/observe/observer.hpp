// What a worker records about its run besides training itself: the trace of executed actions, the
// per-step metrics (metrics.jsonl, MFU, TensorBoard event files), the terminal progress line and the
// peak memory per rank.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "comm/communicator.hpp"
#include "config/job_spec.hpp"
#include "interop/event_file.hpp"
#include "observe/bubble_report.hpp"
#include "observe/metrics.hpp"
#include "observe/progress.hpp"
#include "runtime/executor.hpp"
#include "runtime/trace.hpp"
#include "schedule/action.hpp"

namespace ppctl::observe {

/// One per worker. Every rank records its trace (the first observe.trace_steps steps) and its peak
/// memory; the rank holding the last stage (the one that sees the loss) also writes
/// `<run dir>/metrics.jsonl`, the same numbers as TensorBoard scalars into `<run dir>/tb/`
/// (observe.tensorboard; observe/tensorboard_scalars.hpp) and, when stderr is a terminal, draws the
/// progress line. Without a run
/// directory nothing is written (the progress line and the log suffix still work).
/// Observing never touches tensors: the training numbers are the same with it or without it.
class RunObserver {
 public:
  using Clock = std::chrono::steady_clock;

  /// `rank`: this worker's rank in `program` (its pipeline rank). `run_dir`: the run directory
  /// (kRunDirVariable), or none; with data parallelism only the first replica (dp rank 0) gets it,
  /// so the trace, metrics and progress line are those of replica 0 (`first_replica`), while the
  /// tokens and FLOPs counted are the whole global batch's. `steps`: steps of this run.
  /// Peak FLOP/s per device for MFU: observe.peak_tflops when set, else the known-GPU table for the
  /// CUDA device's name, else none. Throws ppctl::Error when metrics.jsonl or the event file cannot
  /// be created.
  RunObserver(const config::JobSpec& spec, const schedule::Program& program, int rank,
              torch::Device device, std::optional<std::string> run_dir, int64_t steps,
              bool first_replica = true);

  runtime::TraceRecorder& trace() { return trace_; }

  /// Before the first step of this process, `first_step` (from 0; a resumed run's checkpoint step): marks
  /// in the TensorBoard event file that the run goes on from step first_step + 1 (a SessionLog START,
  /// interop::EventFileWriter::write_session_start), so TensorBoard replaces the steps that an earlier
  /// attempt of the same run directory (train.max_restarts) wrote after its last checkpoint.
  void on_start(int64_t first_step);

  /// After optimizer step `step` (from 0), on every rank: `result` from the executor, the learning
  /// rate used, the global gradient norm, whether the step was skipped, when the step began and
  /// when its schedule ended (the rest, up to now, is the norm all-reduce and the optimizer: a trace
  /// slice `optimizer`).
  void on_step(int64_t step, const runtime::StepResult& result, double lr, double grad_norm,
               bool skipped, Clock::time_point step_start, Clock::time_point schedule_end);

  /// After an evaluation that followed optimizer step `step` (from 1), on the rank that logged it:
  /// one line `{"event": "eval", "step": S, "loss": L, "batches": B}` in metrics.jsonl.
  void on_eval(int64_t step, double loss, int64_t batches);

  /// " | 0.42 TFLOP/s | MFU 3.1%" for the last step seen (" | 0.42 TFLOP/s" without a peak), to end
  /// the step's log line.
  std::string log_suffix() const;

  /// After the last step, on every rank together (one all-reduce over `comm`, when not null):
  /// closes the progress line and gathers every rank's peak memory and timing (steps after the
  /// first); the last-stage rank logs the peak memory per rank and the bubble report (measured,
  /// planned and simulated with the measured costs, observe/bubble_report.hpp) and writes the `end`
  /// line of metrics.jsonl; then every rank writes its trace part.
  void finish(comm::Communicator* comm);

  /// Before finish, when the run stopped early on signal `signal_name` (train.on_signal) after `steps_done`
  /// steps: the end line then counts those steps and names the signal.
  void set_stopped(int64_t steps_done, std::string signal_name, bool checkpointed);

  /// Writes this rank's trace part into the run directory: once the last traced step is done (so a
  /// run stopped later keeps it), after a failure (what ran until then) and at finish. A rank killed
  /// while its steps are still being traced leaves none. Logs instead of throwing.
  void write_trace_part() noexcept;

 private:
  /// The most memory this rank has held so far: CUDA allocated bytes (the caching allocator's peak,
  /// read after every step since the executor resets it per step) or the CPU's max resident set.
  int64_t read_peak_memory();
  /// Writes `<run dir>/trace.simulated.json`: ppctl plan's timeline of the same program with the
  /// measured per-stage costs (one step, from 0), to open beside trace.json.
  void write_simulated_trace(const std::vector<RankTiming>& timings) const;

  const config::JobSpec& spec_;
  const schedule::Program& program_;
  int rank_;
  torch::Device device_;
  std::optional<std::string> run_dir_;
  int64_t steps_;
  bool writes_metrics_;  // this rank holds the last stage
  runtime::TraceRecorder trace_;
  std::unique_ptr<JsonlWriter> metrics_;
  std::unique_ptr<interop::EventFileWriter> tensorboard_;  // with metrics_, unless observe.tensorboard is off
  ProgressLine progress_;
  StepMetrics last_;
  int64_t peak_memory_ = 0;
  Clock::time_point start_ = Clock::now();
  double after_first_s_ = 0.0;  // seconds of the steps after the first (for the ETA)
  RankTiming timing_;           // this rank's schedule and compute times, steps after the first
  bool finished_ = false;
  std::string stopped_by_;   // set_stopped
  bool checkpointed_ = false;
};

}  // namespace ppctl::observe
