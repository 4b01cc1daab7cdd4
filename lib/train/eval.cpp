// Held-out evaluation: forward-only passes over the same held-out batches at every evaluation.
#include "train/eval.hpp"

#include "train/microbatches.hpp"

namespace ppctl::train {

bool eval_due(const config::EvalSpec& eval, int64_t done, int64_t total) {
  return eval.interval > 0 && (done % eval.interval == 0 || done == total);
}

std::optional<double> evaluate(runtime::Executor& executor, const schedule::RankProgram& actions,
                               const data::Dataset* dataset, const config::JobSpec& spec,
                               int64_t replica, int64_t replicas, comm::Communicator* data_parallel) {
  double loss_sum = 0.0;
  int64_t loss_count = 0, microbatches = 0;
  for (int64_t batch = 0; batch < spec.eval.batches; ++batch) {
    const auto result =
        executor.run_forward_only(actions, eval_microbatch_source(dataset, spec, batch, replica, replicas));
    loss_sum += result.loss_sum;
    loss_count += result.loss_count;
    microbatches += result.loss_microbatches;
  }
  if (microbatches == 0) return std::nullopt;  // not the last stage
  if (data_parallel != nullptr) {
    const auto sums = data_parallel->all_reduce_sum({loss_sum, static_cast<double>(loss_count)});
    loss_sum = sums[0];
    loss_count = static_cast<int64_t>(sums[1]);
  }
  return loss_count == 0 ? 0.0 : loss_sum / static_cast<double>(loss_count);  // per token, as in training
}

}  // namespace ppctl::train
