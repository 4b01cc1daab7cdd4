// The job spec's schema: every section and key with its reader. Internal to config/; callers use load.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "config/yaml_reader.hpp"

namespace ppctl::config::detail {

constexpr int64_t kMillion = 1'000'000;
constexpr int64_t kBillion = 1'000'000'000;
constexpr int64_t kMaxLayers = 10'000;   // model.layers' upper bound
constexpr int64_t kMaxSteps = kBillion;  // train.steps' upper bound

/// data.path and data.blend as read by the schema; resolved by Loader::resolve_data once data.format and
/// data.dtype are known (YAML keys come in any order).
struct DataEntries {
  std::optional<Entry> path;
  std::optional<Entry> blend;
};

/// Reads one value into its JobSpec field; reports a problem and returns false when it cannot.
using Reader = std::function<bool(Context&, const Entry&)>;

/// One key of a section and how its value is read.
struct Field {
  std::string key;
  Reader read;
};

/// A top-level key (`model`, `pipeline`, ...) and its keys, in the order of the spec layout.
struct Section {
  std::string name;
  std::vector<Field> fields;
};

/// Every section and key of a job spec, reading into `spec`. Ranges match the comments in job_spec.hpp.
/// data.path and data.blend are only kept in `data_entries`, to be read once data.format is known.
std::vector<Section> schema(JobSpec& spec, DataEntries& data_entries);

/// The fix for an unknown key `name` in the mapping at `prefix` whose keys are `known` (a
/// KeyWalk::UnknownKeyHint over `sections`): where it belongs when another section has it ("move it under
/// 'model:' (model.layers)"), else "did you mean 'hidden'?", else the valid keys (or sections, at the top).
std::string unknown_key_hint(const std::vector<Section>& sections, const std::string& name, const std::string& prefix,
                             const std::vector<std::string>& known);

}  // namespace ppctl::config::detail
