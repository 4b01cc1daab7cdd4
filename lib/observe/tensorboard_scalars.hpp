// What a run shows in TensorBoard: the scalars of each step, evaluation and the end of the run, taken
// from the same numbers as metrics.jsonl (observe/metrics.hpp). Written by RunObserver into
// <run dir>/tb/ (observe.tensorboard). No torch.
//
// Tags (TensorBoard groups charts by the part before the first '/'):
//   each step S (1-based, as metrics.jsonl's `step`; a resumed run goes on counting):
//     train/loss, train/lr, train/grad_norm, train/tokens_per_s, train/step_time_s, train/tflops,
//     train/mfu (only when a peak is known), memory/peak_bytes (the writing rank's peak so far);
//   each evaluation after step S: eval/loss;
//   the end of the run, at step = the run's last step, one tag per rank r:
//     bubble/measured/rank<r>, bubble/planned/rank<r>, bubble/simulated/rank<r>
//     (metrics.jsonl's `end` line bubble_measured[r], bubble_planned[r], bubble_simulated[r]).
// Each worker process (a run, or one attempt of it under train.max_restarts) writes its own event file, which
// starts with a SessionLog START at the step it goes on from (RunObserver::on_start): TensorBoard then drops
// what earlier attempts wrote at that step or later, so each step shows once.
#pragma once

#include <string>
#include <vector>

#include "interop/event_file.hpp"
#include "observe/metrics.hpp"

namespace ppctl::observe {

/// The folder, inside a run directory, that holds its event files.
inline constexpr const char* kTensorBoardFolder = "tb";

/// The scalars of one step (see the tags above). A NaN loss stays NaN (metrics.jsonl writes null).
std::vector<interop::Scalar> step_scalars(const StepMetrics& metrics);

/// The scalar of one evaluation: eval/loss.
std::vector<interop::Scalar> eval_scalars(double loss);

/// `bubble/<kind>/rank<rank>`, e.g. bubble/measured/rank0.
std::string bubble_tag(const std::string& kind, size_t rank);

/// The scalars of the end of a run: the bubble fractions per rank (measured, planned, simulated);
/// none without a bubble report (a run whose steps were not timed).
std::vector<interop::Scalar> end_scalars(const RunSummary& summary);

}  // namespace ppctl::observe
