// Fault injection for tests: the worker's hidden `--inject-nan` and `--inject-crash-in-checkpoint`.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

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

/// Parses the hidden `--inject-crash-in-checkpoint STEP:FILES` (both from 1, digits only): the
/// worker kills itself with SIGKILL after writing FILES unit files of the checkpoint of step STEP.
/// Throws ppctl::Error with the expected form otherwise.
std::pair<int64_t, int64_t> parse_checkpoint_crash(const std::string& text);

}  // namespace ppctl::train
