// Fault injection for tests: the worker's hidden `--inject-nan STAGE:STEP` option.
#pragma once

#include <cstdint>
#include <string>

namespace ppctl::train {

/// Poison stage `stage`'s gradients with NaN after the backward of optimizer step `step` (counted
/// from 1, as in the log), to exercise train.on_nonfinite end to end.
struct NanInjection {
  int64_t stage = 0;
  int64_t step = 1;
};

/// Parses "STAGE:STEP" (stage >= 0, step >= 1, digits only). Throws ppctl::Error with the
/// expected form otherwise.
NanInjection parse_nan_injection(const std::string& text);

}  // namespace ppctl::train
