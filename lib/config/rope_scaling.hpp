// model.rope_scaling: the reader of RoPE scaling parameters written as transformers' rope_parameters
// (a mapping), in a spec or taken from a model.init_from folder's config.json. Internal to config/.
#pragma once

#include "config/job_spec.hpp"
#include "config/yaml_reader.hpp"

namespace ppctl::config::detail {

/// Reads a mapping such as `{rope_type: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 4,
/// original_max_position_embeddings: 8192}` into `out`, with the rules transformers' modeling_rope_utils
/// validates (_validate_*_rope_parameters) made errors:
///   rope_type (`type` is read as its older spelling): default, linear, llama3 or yarn;
///   linear: factor >= 1 (required);
///   llama3: factor >= 1, low_freq_factor > 0, high_freq_factor > low_freq_factor,
///     original_max_position_embeddings >= 1 (all required);
///   yarn: factor >= 1 and original_max_position_embeddings >= 1 (required), attention_factor > 0,
///     beta_fast > 0, beta_slow > 0, mscale, mscale_all_dim (numbers), truncate (true / false);
///   partial_rotary_factor, when given, 1. A null value is as if the key were absent.
/// Keys another type uses, rope_theta (model.rope_theta holds it) and unknown keys are problems.
/// Each problem names `e`'s path (or label) and the key. Returns whether `out` was set.
bool read_rope_scaling(Context& c, const Entry& e, RopeScaling& out);

}  // namespace ppctl::config::detail
