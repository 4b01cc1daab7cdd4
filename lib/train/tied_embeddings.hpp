// Tied input/output embeddings across pipeline stages: the log line that lets tests check that the
// first stage's token embedding and the last stage's copy (its LM head) stay bitwise equal. Their
// gradient sum is reduced with the other gradients (optim/grad_buffers.hpp).
#pragma once

#include <vector>

#include "model/stage.hpp"
#include "optim/optimizer.hpp"

namespace ppctl::train {

/// Logs `tied embedding on stage S: fnv1a64 H, moments fnv1a64 M` for each tied copy on this rank:
/// H hashes the weight's bytes, M those of its two AdamW moments in `optimizer` (exp_avg then
/// exp_avg_sq; of empty moments before any step) as `optimizer` keeps them (for the tensor it steps:
/// the copy, or its fp32 main copy), so that the copies' bitwise equality can be checked across
/// processes (tests do).
void log_tied_weights(const std::vector<model::StageModule>& stages, optim::StepOptimizer& optimizer);

}  // namespace ppctl::train
