// The job spec's schema: one table of every section and key, each with its type, range, default, a one-line
// doc and its reader. Adding a plain field takes its JobSpec member (job_spec.hpp) and one row in schema.cpp;
// a rule that spans fields goes to rules.cpp. Internal to config/; callers use load.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "config/yaml_reader.hpp"

namespace ppctl::config::detail {

/// Bounds the schema's ranges are written with.
constexpr int64_t kMillion = 1'000'000;
constexpr int64_t kBillion = 1'000'000'000;
constexpr int64_t kMaxLayers = 10'000;   // model.layers' upper bound
constexpr int64_t kMaxSteps = kBillion;  // train.steps' upper bound

/// data.path and data.blend as read by the schema; resolved by the loader once data.format and data.dtype
/// are known (YAML keys come in any order).
struct DataEntries {
  std::optional<Entry> path;   ///< data.path as written, when the spec has it
  std::optional<Entry> blend;  ///< data.blend as written, when the spec has it
};

/// Reads one value into its JobSpec field; reports a problem and returns false when it cannot.
using Reader = std::function<bool(Context&, const Entry&)>;

/// How a field's value is written, and so which reader reads it.
enum class FieldType {
  Integer,    ///< a whole number in `ints` (read_int)
  Real,       ///< a finite number in `reals` (read_real)
  Boolean,    ///< `true` or `false`, unquoted
  Choice,     ///< one of `choices`, spelled exactly (read_enum)
  Text,       ///< a non-empty string: a path, a host (read_text)
  Integers,   ///< a non-empty list of whole numbers, each in `ints`
  Reals,      ///< a list of numbers, each in `reals`
  DataPaths,  ///< data.path and data.blend: kept in DataEntries and read by data_paths.hpp
  Mapping,    ///< a mapping of named parameters read by the field's own reader (model.rope_scaling)
};

/// One row of the schema: a key of a section, what its value may be, and how it is read.
struct Field {
  std::string key;
  FieldType type;
  std::string doc;                   ///< what the value means, in one line (docs/job-spec.md tells the rest)
  std::string default_text;          ///< the JobSpec member's initial value as YAML writes it; "" when none
  std::optional<IntRange> ints;      ///< Integer and Integers: the values allowed (for each entry)
  std::optional<RealRange> reals;    ///< Real and Reals: the values allowed (for each entry)
  std::vector<std::string> choices;  ///< Boolean and Choice: every spelling accepted, in order
  Reader read;
};

/// A top-level key (`model`, `pipeline`, ...) and its keys, in the order of the spec layout.
struct Section {
  std::string name;
  std::vector<Field> fields;
  std::string doc;  ///< what the section holds, in one line (the reference's heading text)

  /// The keys of `fields`, in order.
  std::vector<std::string> keys() const;

  /// The field named `key`; nullptr when the section has none.
  const Field* field(const std::string& key) const;
};

/// Every section and key of a job spec, reading into `spec`; each field's default is the value `spec` holds
/// now (a fresh JobSpec's, as the loader uses it). Ranges match the comments in job_spec.hpp.
/// data.path and data.blend are only kept in `data_entries`, to be read once data.format is known.
std::vector<Section> schema(JobSpec& spec, DataEntries& data_entries);

/// The fix for an unknown key `name` in the mapping at `prefix` whose keys are `known` (a
/// KeyWalk::UnknownKeyHint over `sections`): where it belongs when another section has it ("move it under
/// 'model:' (model.layers)"), else where another tool's name for it goes ("Megatron-LM's num_layers is
/// model.layers", foreign_key_hint), else "did you mean 'hidden'?", else the valid keys (or sections, at the top).
std::string unknown_key_hint(const std::vector<Section>& sections, const std::string& name, const std::string& prefix,
                             const std::vector<std::string>& known);

}  // namespace ppctl::config::detail
