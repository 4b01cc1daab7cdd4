// The global gradient norm over every parameter of every stage on every rank, the check for
// non-finite losses and gradients, and global-norm clipping (as torch.nn.utils.clip_grad_norm_).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "model/stage.hpp"

namespace ppctl::optim {

/// One step's gradient statistics, indexed by global stage. A rank fills in the stages it holds
/// (local_gradient_stats); once summed over the pipeline (reduce_gradient_stats) every rank holds
/// the same values, so every rank takes the same decisions (clip, skip, stop) and nobody waits for
/// a rank that has given up.
struct GradientStats {
  std::vector<double> sum_squares;  ///< per stage: sum of squared gradient entries (fp64); NaN or
                                    ///< inf when one of them is not finite
  std::vector<double> loss_nonfinite;  ///< per stage: 1 where the stage's loss was NaN or infinite
  std::vector<double> loss_microbatch;  ///< per stage: 1 + the step's first microbatch (numbered over every replica,
                                        ///< d x m + k) whose loss was NaN or infinite there; 0 when none
  std::vector<double> replica_nonfinite;  ///< per dp replica: non-zero where that replica saw a non-finite
                                          ///< value (agree_over_replicas); empty without data parallelism
  /// Per entry of launch::kStopSignals: how many ranks got that signal (train.on_signal). A rank sets its
  /// own (request_stop) before the sums, so every rank agrees to stop after the same step, at no extra
  /// collective (the all-reduces below carry them).
  std::vector<double> stop_requests;
  /// Records this rank's stop signal `sig` (one of launch::kStopSignals; 0 = none).
  void request_stop(int sig);
  /// The stop signal agreed on: the first of launch::kStopSignals some rank got; 0 when none.
  int stop_signal() const;

  /// sqrt of the sum over every stage: the global L2 norm (NaN/inf when a gradient is not finite).
  double norm() const;
  /// True when no loss and no gradient is NaN or infinite.
  bool finite() const;
  /// "non-finite loss on stage 3 and non-finite gradients on stages 1, 3"; empty when finite().
  std::string describe_nonfinite() const;
};

/// This rank's share: the gradients of `stages` (those without a gradient count 0) by their global
/// stage index, in fp64, and the loss of the stage holding the head when `loss_count` > 0 (its
/// microbatches' losses summed to `loss_sum`). `num_stages` is the job's total number of stages.
GradientStats local_gradient_stats(const std::vector<model::StageModule>& stages,
                                   int64_t num_stages, double loss_sum, int64_t loss_count,
                                   int64_t nonfinite_microbatch = -1);

/// Whether this rank counts parameter `name` of `stage` in the global norm: a split parameter on every tp rank (its
/// shard), a replicated one (model::parameter_split) on tp rank 0 only, so that a sum over the tensor-parallel group
/// counts every entry once. Always true at t = 1.
bool counts_in_norm(const model::StageModuleImpl& stage, const std::string& name);

/// The gradients of `stages` by global stage, each once: a tied embedding's copy on the stage holding the
/// head is left out (it counts on the first stage); at t > 1 the replicated parameters (model::parameter_split)
/// only on tp rank 0, so that a sum over the tensor-parallel group counts every entry once. Views of the
/// parameters' .grad (undefined ones included).
std::map<int64_t, std::vector<torch::Tensor>> stage_gradients(const std::vector<model::StageModule>& stages);

/// The same over given gradients: `owned` by global stage (the distributed optimizer's shard
/// pieces, DistributedOptimizer::owned_gradients) in place of the stages' whole .grad; `stages` say
/// which stage holds the head (for the loss).
/// `nonfinite_microbatch`: the step's first microbatch with a NaN or infinite loss on this rank's last stage,
/// numbered over every replica (d x m + k), or -1 (StepResult::first_nonfinite_microbatch on replica d).
GradientStats local_gradient_stats(const std::vector<model::StageModule>& stages,
                                   const std::map<int64_t, std::vector<torch::Tensor>>& owned, int64_t num_stages,
                                   double loss_sum, int64_t loss_count, int64_t nonfinite_microbatch = -1);

/// Sums `stats` element-wise over the ranks of each group in `groups`, in order (one all-reduce
/// each, bounded by the group's timeout). For a pipeline that is the one pipeline group; an empty
/// list leaves `stats` as they are (one rank). Data-parallel replicas or tied parameters will add
/// groups or weights here, not new code paths.
void reduce_gradient_stats(GradientStats& stats, const std::vector<comm::Communicator*>& groups);

/// Makes the non-finite decision the same on every rank of a dp x pp job: after reduce_gradient_stats each
/// replica's ranks agree, but a value that turns non-finite after the data-parallel all-reduce on one
/// replica only would make that replica skip (or stop) alone and the replicas' weights diverge. One
/// all-reduce over `data_parallel` (this pipeline rank in every replica; `dp_rank` of `dp_size`) of the
/// per-stage non-finite flags and one flag per replica: afterwards every stage that is non-finite on any
/// replica is non-finite here (its sum_squares NaN, its loss flag set), and replica_nonfinite names the
/// replicas, so every rank of the world skips or stops alike. Finite stats are left bitwise as they are.
/// Bounded by the group's timeout.
void agree_over_replicas(GradientStats& stats, comm::Communicator& data_parallel, int64_t dp_rank,
                         int64_t dp_size);

/// optimizer.distributed: each replica summed only its shard of every gradient; adds sum_squares over
/// `data_parallel` (one all-reduce, bounded by its timeout) so that it covers every gradient once. The
/// other fields, already the same on every replica (agree_over_replicas), are left as they are.
void sum_over_shards(GradientStats& stats, comm::Communicator& data_parallel);

/// The factor torch.nn.utils.clip_grad_norm_ scales gradients by: min(1, max_norm / (norm + 1e-6))
/// (torch/nn/utils/clip_grad.py, `clip_coef_clamped`).
double clip_coefficient(double norm, double max_norm);

/// Multiplies every defined gradient of `stages` by `factor`, in place.
void scale_gradients(const std::vector<model::StageModule>& stages, double factor);

}  // namespace ppctl::optim
