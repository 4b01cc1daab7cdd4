// Tied input/output embeddings across pipeline stages: the log line that lets tests check that the
// first stage's token embedding and the last stage's copy (its LM head) stay bitwise equal. Their
// gradient sum is reduced with the other gradients (train/grad_buffers.hpp).
#pragma once

#include <vector>

#include "model/stage.hpp"

namespace ppctl::train {

/// Logs `tied embedding on stage S: fnv1a64 H` for each tied copy on this rank: a hash of the
/// weight's bytes, so the copies' bitwise equality can be checked across processes (tests do).
void log_tied_weights(const std::vector<model::StageModule>& stages);

}  // namespace ppctl::train
