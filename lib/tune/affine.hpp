// `ppctl plan --tune` with two --layer-costs probes: each piece's time per microbatch fitted as
// t(b) = a + c x b over the micro batch size b (a fixed part per action plus a part per sequence). No torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/layer_times.hpp"

namespace ppctl::tune {

/// Per-layer times measured at two micro batch sizes and the affine fit through them.
struct AffineTimes {
  int64_t low_mbs = 0;          ///< the smaller probed micro batch size
  int64_t high_mbs = 0;         ///< the larger one
  plan::LayerTimes low;         ///< times per microbatch measured at low_mbs (ms)
  plan::LayerTimes high;        ///< at high_mbs
  plan::LayerTimes fixed;       ///< a: ms per action whatever the micro batch size
  plan::LayerTimes per_sequence;  ///< c: ms per sequence of the microbatch
  std::vector<std::string> clamped;  ///< one line per piece whose a or c was clamped at 0
};

/// Fits every forward and backward (each block, the embedding, the head) as t(b) = a + c x b through the
/// two probes: c = (t_high - t_low) / (high_mbs - low_mbs), a = t_low - c x low_mbs. A negative c (the
/// larger batch measured faster: noise) is clamped to c = 0, a = the mean of the two; a negative a (time
/// growing faster than the batch) to a = 0, c = t_high / high_mbs. Each clamp is named in `clamped`. The
/// probes may be given in either order. Throws ppctl::PlanError when the two micro batch sizes are equal
/// or not positive, or the block counts differ (`first_source`, `second_source` name them in the message).
AffineTimes fit_affine(const plan::LayerTimes& first, int64_t first_mbs, const std::string& first_source,
                       const plan::LayerTimes& second, int64_t second_mbs, const std::string& second_source);

/// The times per microbatch at micro batch size `mbs`: a probe's own measured times at a probed size
/// (exactly), else a + c x mbs of each piece (an extrapolation outside [low_mbs, high_mbs]).
plan::LayerTimes times_at(const AffineTimes& fit, int64_t mbs);

/// True when `mbs` lies outside [low_mbs, high_mbs] (times_at extrapolates).
bool extrapolated(const AffineTimes& fit, int64_t mbs);

/// How far beyond the probed sizes the search goes: micro batch sizes in [low_mbs / kSearchMargin (rounded
/// up), high_mbs x kSearchMargin]. A linear fit of two points is not trusted further out (a smoke run that
/// extrapolated from probes at 1 and 4 to 16 predicted 42-60 % below measured: docs/benchmarks.md).
constexpr int64_t kSearchMargin = 2;

/// True when the search tries micro batch size `mbs` under `fit` (within the probed sizes and the margin).
bool searched(const AffineTimes& fit, int64_t mbs);

}  // namespace ppctl::tune
