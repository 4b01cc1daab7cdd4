// Fault injection for tests: the worker's hidden `--inject-nan` and `--inject-crash-in-checkpoint`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace ppctl::train {

/// Poison stage `stage`'s gradients with NaN after the backward (and the data-parallel all-reduce) of
/// optimizer step `step` (counted from 1, as in the log), to exercise train.on_nonfinite end to end: on
/// every dp replica, or on dp replica `replica` only; on every tensor-parallel rank of the stage, or on tp rank
/// `tp_rank` only. Each poisoned rank fills the first gradient it counts in the global norm (above tp rank 0: a
/// shard of a split weight, which no other rank holds).
struct NanInjection {
  int64_t stage = 0;
  int64_t step = 1;
  std::optional<int64_t> replica;
  std::optional<int64_t> tp_rank;
};

/// Parses "STAGE:STEP", "STAGE:STEP:REPLICA" or "STAGE:STEP:REPLICA:TP_RANK" (stage >= 0, step >= 1, replica >= 0,
/// tp rank >= 0, digits only). Throws ppctl::Error with the expected form otherwise.
NanInjection parse_nan_injection(const std::string& text);

/// Parses the hidden `--inject-crash-in-checkpoint STEP:FILES` (both from 1, digits only): the
/// worker kills itself with SIGKILL after writing FILES unit files of the checkpoint of step STEP.
/// Throws ppctl::Error with the expected form otherwise.
std::pair<int64_t, int64_t> parse_checkpoint_crash(const std::string& text);

}  // namespace ppctl::train
