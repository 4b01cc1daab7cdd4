// The correctness oracle: gradient dumps from pipelined workers, the unpipelined reference over the
// same global batch, and their comparison (used by `ppctl verify` and the parity tests).
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "model/stage.hpp"

namespace ppctl::train {

/// Parameter name (global, e.g. `block3.fc1.weight`) -> gradient. Two entries hold double scalars
/// of the whole step: "__loss__", the mean loss over the step's microbatches (where known), and
/// "__grad_norm__", the global gradient norm before clipping.
using GradientMap = std::map<std::string, torch::Tensor>;
inline constexpr const char* kLossKey = "__loss__";
inline constexpr const char* kGradNormKey = "__grad_norm__";

/// Writes the gradients of `stages` as they stand (after clipping, when clipping is on), plus
/// "__grad_norm__" = `grad_norm` and "__loss__" = loss_sum / loss_count when loss_count > 0,
/// as a pickled Dict<string, Tensor> to `path`, atomically (temporary file, then rename). Whole tensors: at
/// t > 1 each gradient is gathered over the stage's tensor-parallel group first (collective: every rank of the
/// group calls it), so every tp rank writes the same values.
/// Throws ppctl::Error naming the file when it cannot be written.
void dump_gradients(const std::vector<model::StageModule>& stages, double loss_sum,
                    int64_t loss_count, double grad_norm, const std::string& path);

/// Reads one dump written by dump_gradients. Throws ppctl::Error naming a missing or unreadable
/// file.
GradientMap load_gradient_dump(const std::string& path);

/// Reads DIR/rank0.pt .. DIR/rank<ranks-1>.pt into one map. An entry found in several dumps (the
/// global norm, which every rank writes; a stage's gradients on each data-parallel replica) must be
/// bitwise equal in all of them. Throws ppctl::Error naming a missing or unreadable file, or an
/// entry whose copies differ.
GradientMap load_gradient_dumps(const std::string& dir, int64_t ranks);

/// One process, no pipeline: the whole model built from the spec's seed, gradients of step `step`
/// accumulated over the same global batch, dp x m microbatches (loss scaled by 1/(dp m)) with the same dropout masks, then
/// clipped to optimizer.clip_grad_norm when that is on (the same formula as the workers). Under
/// runtime.precision bf16-params the weights are rounded to bf16 and each microbatch's gradients are
/// accumulated into fp32 .grad, as the pipeline's gradient buffers do.
/// When runtime.p2p_dtype resolves to bf16, the activation and its gradient are rounded to bf16 and
/// back (one autograd node) wherever the job's layout passes them between ranks, as the pipeline
/// does; hand-offs between stages on one rank are not rounded, nor is anything under fp32.
GradientMap reference_gradients(const config::JobSpec& spec, int64_t step = 0);

/// One row of a comparison: max |a - b| / max |b| over the tensor (b = reference).
struct GradientDifference {
  std::string name;
  double max_relative_difference = 0.0;
  double reference_max_abs = 0.0;
};

/// Compares every entry of `reference` with `pipelined` (same names required). Throws ppctl::Error
/// naming entries present in only one map or with different shapes.
std::vector<GradientDifference> compare_gradients(const GradientMap& pipelined,
                                                  const GradientMap& reference);

}  // namespace ppctl::train
