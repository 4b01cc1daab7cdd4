// The per-layer costs file of `ppctl plan --layer-costs FILE` (JSON): forward and backward time of the
// blocks, the embedding and the LM head + loss, ms per microbatch, fully validated. No torch.
#pragma once

#include <cstdint>
#include <string>

#include "plan/layer_times.hpp"

namespace ppctl::plan {

/// Reads a costs file's text:
///   {"block":     {"forward_ms": 0.75, "backward_ms": 2.6},   one entry for every block, or
///    "blocks":    [{"forward_ms": ..., "backward_ms": ...}, ...],   one per block (model.layers entries)
///    "embedding": {"forward_ms": 0.05, "backward_ms": 0.9},
///    "head":      {"forward_ms": 7.9,  "backward_ms": 5.5},   final norm + LM head + loss
///    "micro_batch_size": 4}   optional: the micro batch size measured at (LayerTimes::micro_batch_size)
/// Times are milliseconds per microbatch (micro_batch_size sequences of seq_len tokens), finite and
/// >= 0; a block's forward + backward must be > 0. `layers` is model.layers. Throws ppctl::PlanError
/// listing every problem, one line each: `SOURCE: FIELD: value V: RULE (fix: HINT)` (not JSON, a key
/// missing or unknown, both or neither of block and blocks, a wrong count of blocks, a value that is not
/// a number, negative or not finite).
LayerTimes parse_cost_file(const std::string& text, const std::string& source, int64_t layers);

/// parse_cost_file on the file at `path`; throws ppctl::PlanError naming it when it cannot be read.
LayerTimes read_cost_file(const std::string& path, int64_t layers);

}  // namespace ppctl::plan
