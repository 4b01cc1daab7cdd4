// `ppctl plan --tune`: one configuration the tuner tries, the spec lines that select it, and the spec it
// gives once those lines are applied to the job's YAML and validated by the loader's own rules. No torch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/job_spec.hpp"

namespace ppctl::tune {

/// One key the tuner sets in the spec: `path` a dotted key (`pipeline.microbatches`), `yaml` its value as
/// YAML flow text (`16`, `zb-h1`, `[2, 2, 3]`, `{f: 1.5, i: 1, w: 1}`); an empty `yaml` removes the key.
struct Change {
  std::string path;
  std::string yaml;
};

/// How a candidate splits the blocks over its stages.
enum class Split {
  Uniform,   ///< pipeline.balance: uniform
  Auto,      ///< pipeline.balance: auto (FLOP costs, confirmed by simulation)
  Measured,  ///< pipeline.layers_per_stage from schedule::balance_by_times of the given layer costs
};

/// `uniform`, `auto` or `measured`.
std::string to_string(Split split);

/// What a candidate is: the knobs the search turns.
struct Knobs {
  config::ScheduleKind kind = config::ScheduleKind::OneFOneB;
  int64_t virtual_stages = 1;    ///< v
  int64_t microbatches = 1;      ///< m
  int64_t micro_batch_size = 1;  ///< global batch per replica / m
  Split split = Split::Uniform;
  config::Recompute recompute = config::Recompute::None;
  /// Another tensor-parallel size than the spec's, taking its ranks from dp (tp x dp stays the spec's): t and the
  /// dp it leaves; 0 = the spec's own tp and dp (no change).
  int64_t tensor_parallel = 0;
  int64_t data_parallel = 0;
};

/// One line naming the knobs: `zb-h1, m 16 x mbs 4, uniform split, recompute none`, with another tp
/// `..., recompute none, tp 8 x dp 1`.
std::string describe(const Knobs& knobs);

/// The spec changes that select `knobs` (schedule, virtual_stages, microbatches, micro_batch_size, balance,
/// train.recompute; tensor_parallel and data_parallel when Knobs::tensor_parallel is set) on top of `spec`: pipeline.microbatch_group_size, pipeline.layers_per_stage and
/// pipeline.zb_auto are removed when `spec` writes them (the generated candidates use the default group size,
/// balance's split and no zb-auto costs; callers add an explicit split or zb-auto costs as changes of their
/// own). train.recompute_every keeps the spec's value.
std::vector<Change> changes_of(const Knobs& knobs, const config::JobSpec& spec);

/// The YAML lines a user puts in the spec for `changes`: one flow mapping per top-level section, in the
/// order the sections first appear (`pipeline: {schedule: zb-h1, microbatches: 16}`), then one comment
/// line `# remove: pipeline.layers_per_stage, ...` for the removals. Each line ends in '\n'.
std::string yaml_lines(const std::vector<Change>& changes);

/// A job spec's YAML text with changes applied and re-validated by config::parse_job_spec (every rule the
/// loader applies). Built once per spec; apply() is then one YAML clone, edit, dump and parse.
class SpecEditor {
 public:
  /// `text` is the spec's YAML, `base_dir` the folder relative data paths are resolved against. Throws
  /// ppctl::ConfigError when the text is not a YAML mapping.
  SpecEditor(const std::string& text, std::string base_dir);
  ~SpecEditor();
  SpecEditor(const SpecEditor&) = delete;
  SpecEditor& operator=(const SpecEditor&) = delete;

  /// The spec `changes` give. Throws ppctl::ConfigError (every problem the loader finds, the source named
  /// `candidate`) when they break a rule.
  config::JobSpec apply(const std::vector<Change>& changes) const;

  /// The YAML text `changes` give (what apply() validates).
  std::string text(const std::vector<Change>& changes) const;

 private:
  struct Root;
  std::unique_ptr<Root> root_;
  std::string base_dir_;
};

/// Why a candidate was refused, for counting: the first problem of a ppctl::ConfigError thrown by
/// SpecEditor::apply, as `rule: FIELD: RULE` (its location, value and fix left out, so that candidates
/// refused by the same rule count together), or a ppctl::ScheduleError's message up to its fix, as
/// `rule: MESSAGE`.
std::string refusal_reason(const std::exception& error);

}  // namespace ppctl::tune
