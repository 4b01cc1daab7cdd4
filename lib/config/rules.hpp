// The rules that span fields of a job spec (layers against stages, a schedule's own keys, data against
// seq_len, eval, checkpoints, the learning-rate schedule, the fields of one architecture, ...), checked once
// every key is read. Internal to config/; callers use load.hpp.
#pragma once

#include <string>

#include "config/job_spec.hpp"
#include "config/yaml_reader.hpp"

namespace ppctl::config::detail {

/// A spec being loaded as the rules see it: the spec as read so far, the problem list, and where each key
/// was seen and whether its value was accepted.
struct SpecState {
  JobSpec& spec;
  Context& c;
  SeenKeys seen;
  bool steps_overridden = false;  ///< `--steps` was given (SpecOverrides::steps), whether in range or not

  /// True when `path` and its section were either absent (default applies) or read without problems,
  /// so a combination check on it would not repeat an error already reported.
  bool usable(const std::string& path) const;

  /// Reports a combination problem on `path` (the later key of the pair in the spec layout), at its line, or
  /// at the line of `other` when `path` was left at its default; named by its Seen::label when it has one
  /// (a field taken from config.json: the file and its key there).
  void combination_problem(const std::string& path, const std::string& other, const std::string& value,
                           const std::string& rule, const std::string& hint);

  /// How messages name train.steps: `train.steps (6)`, or `the step count (--steps 4)` when overridden.
  std::string steps_named() const;
};

/// Checks every rule that spans fields and reports each broken one to `s.c.problems`, on the later key of
/// the pair (SpecState::combination_problem); a rule on a field that was already reported is skipped. Also
/// completes the spec: model.tie_embeddings false for llama when not written, checkpoint.dir and
/// pipeline.schedule_file made absolute.
void check_rules(SpecState& s);

}  // namespace ppctl::config::detail
