// pipeline.zb_auto: the reader of the costs the zb-auto schedule places W with (a mapping). Internal to
// config/; the rules against the other pipeline keys are in rules.cpp.
#pragma once

#include "config/job_spec.hpp"
#include "config/yaml_reader.hpp"

namespace ppctl::config::detail {

/// Reads a mapping such as `{f: 1.2, i: [0.1, 1, 1, 1], w: 1, b: 1.5, defer_penalty: 0.2, p2p_latency: 0.05,
/// max_in_flight: 4}` into `out` (ZbAutoSpec, every key optional, a null value as if absent):
///   f, i, w, b, defer_penalty: ms, a number or a non-empty list of numbers, each in [0, 1e9] (b not given:
///   ZbAutoSpec::backward stays empty, B = I + W);
///   p2p_latency: ms, a number in [0, 1e9]; max_in_flight: an integer in [0, 1e6].
/// An unknown key is a problem naming the keys it takes (and the closest one). List lengths (1 or
/// pipeline.stages) are checked by rules.cpp once pipeline.stages is known. Each problem names `e`'s path
/// and the key. Returns whether `out` was set.
bool read_zb_auto(Context& c, const Entry& e, ZbAutoSpec& out);

}  // namespace ppctl::config::detail
