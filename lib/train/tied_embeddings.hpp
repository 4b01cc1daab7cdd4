// Tied input/output embeddings across pipeline stages: the last stage's copy of the token embedding
// (its LM head) and the first stage's original get the same gradient, the sum of both, every step.
#pragma once

#include <vector>

#include "comm/communicator.hpp"
#include "model/stage.hpp"

namespace ppctl::train {

/// Makes the gradients of every tied embedding weight on this rank (the first stage's
/// `tok_embed.weight`, the last stage's copy `lm_head.weight`; model::StageModuleImpl::tied_weight)
/// equal to their sum over the job's two copies: the local copies are added, then summed over
/// `group` (the pipeline ranks holding the first and the last stage; null when one rank holds
/// both), and the sum is written back into each copy. Afterwards both copies hold bitwise
/// identical gradients, so identical AdamW steps keep the weights bitwise identical. The sum is
/// the gradient of the one shared weight of an unpipelined model (Press & Wolf, arXiv 1608.05859;
/// Megatron-LM's embedding group). Call it after the data-parallel average: both are linear, and
/// each replica pair then sums the same averaged values. No-op when the rank holds no tied weight.
void sync_tied_embeddings(const std::vector<model::StageModule>& stages, comm::Communicator* group);

/// Logs `tied embedding on stage S: fnv1a64 H` for each tied copy on this rank: a hash of the
/// weight's bytes, so the copies' bitwise equality can be checked across processes (tests do).
void log_tied_weights(const std::vector<model::StageModule>& stages);

}  // namespace ppctl::train
