// A tuner candidate's spec lines, applied to the job's YAML and validated by the loader (config::parse_job_spec).
#include "tune/candidate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <utility>

#include "config/load.hpp"
#include "core/error.hpp"

namespace ppctl::tune {

std::string to_string(Split split) {
  switch (split) {
    case Split::Uniform: return "uniform";
    case Split::Auto: return "auto";
    case Split::Measured: return "measured";
  }
  return "?";
}

std::string describe(const Knobs& knobs) {
  std::string kind = config::to_string(knobs.kind);
  if (knobs.kind == config::ScheduleKind::Interleaved1F1B) kind += fmt::format(" v {}", knobs.virtual_stages);
  return fmt::format("{}, m {} x mbs {}, {} split, recompute {}{}", kind, knobs.microbatches, knobs.micro_batch_size,
                     to_string(knobs.split), config::to_string(knobs.recompute),
                     knobs.tensor_parallel > 0
                         ? fmt::format(", tp {} x dp {}", knobs.tensor_parallel, knobs.data_parallel)
                         : std::string());
}

std::vector<Change> changes_of(const Knobs& knobs, const config::JobSpec& spec) {
  std::vector<Change> out{
      {"pipeline.schedule", config::to_string(knobs.kind)},
      {"pipeline.virtual_stages", std::to_string(knobs.virtual_stages)},
      {"pipeline.microbatches", std::to_string(knobs.microbatches)},
      {"pipeline.micro_batch_size", std::to_string(knobs.micro_batch_size)},
      {"pipeline.balance", knobs.split == Split::Auto ? "auto" : "uniform"},
  };
  if (knobs.tensor_parallel > 0) {
    out.push_back({"pipeline.tensor_parallel", std::to_string(knobs.tensor_parallel)});
    out.push_back({"pipeline.data_parallel", std::to_string(knobs.data_parallel)});
  }
  if (spec.pipeline.microbatch_group_size != 0) out.push_back({"pipeline.microbatch_group_size", ""});
  if (!spec.pipeline.layers_per_stage.empty()) out.push_back({"pipeline.layers_per_stage", ""});
  if (spec.pipeline.schedule == config::ScheduleKind::ZBAuto) out.push_back({"pipeline.zb_auto", ""});
  out.push_back({"train.recompute", config::to_string(knobs.recompute)});
  return out;
}

std::string yaml_lines(const std::vector<Change>& changes) {
  std::vector<std::pair<std::string, std::vector<std::string>>> sections;
  std::vector<std::string> removed;
  for (const auto& change : changes) {
    if (change.yaml.empty()) {
      removed.push_back(change.path);
      continue;
    }
    const auto dot = change.path.find('.');
    const std::string section = change.path.substr(0, dot);
    const std::string key = dot == std::string::npos ? std::string() : change.path.substr(dot + 1);
    auto it = sections.begin();
    while (it != sections.end() && it->first != section) ++it;
    if (it == sections.end()) it = sections.insert(sections.end(), {section, {}});
    it->second.push_back(fmt::format("{}: {}", key, change.yaml));
  }
  std::string out;
  for (const auto& [section, entries] : sections) out += fmt::format("{}: {{{}}}\n", section, fmt::join(entries, ", "));
  if (!removed.empty()) out += fmt::format("# remove: {}\n", fmt::join(removed, ", "));
  return out;
}

struct SpecEditor::Root {
  YAML::Node node;
};

SpecEditor::SpecEditor(const std::string& text, std::string base_dir) : root_(std::make_unique<Root>()), base_dir_(std::move(base_dir)) {
  try {
    root_->node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError({fmt::format("the spec is not valid YAML: {}", e.what())});
  }
  if (!root_->node.IsMap()) {
    throw ConfigError({"the spec is not a YAML mapping (fix: give a job spec, e.g. configs/example.yaml)"});
  }
}

SpecEditor::~SpecEditor() = default;

std::string SpecEditor::text(const std::vector<Change>& changes) const {
  YAML::Node edited = YAML::Clone(root_->node);
  for (const auto& change : changes) {
    const auto dot = change.path.find('.');
    const std::string section = change.path.substr(0, dot);
    const std::string key = change.path.substr(dot + 1);
    if (change.yaml.empty()) {
      if (edited[section] && edited[section].IsMap()) edited[section].remove(key);
      continue;
    }
    if (!edited[section] || !edited[section].IsMap()) edited[section] = YAML::Node(YAML::NodeType::Map);
    edited[section][key] = YAML::Load(change.yaml);
  }
  return YAML::Dump(edited) + "\n";
}

config::JobSpec SpecEditor::apply(const std::vector<Change>& changes) const {
  return config::parse_job_spec(text(changes), "candidate", base_dir_);
}

std::string refusal_reason(const std::exception& error) {
  if (const auto* config = dynamic_cast<const ConfigError*>(&error); config && !config->problems().empty()) {
    std::string line = config->problems().front();
    // `candidate:LINE: FIELD: value V: RULE (fix: HINT)` -> `FIELD: RULE`
    if (line.rfind("candidate:", 0) == 0) {
      const auto after = line.find(": ");
      if (after != std::string::npos) line = line.substr(after + 2);
    }
    if (const auto fix = line.find(" (fix:"); fix != std::string::npos) line.resize(fix);
    if (const auto value = line.find(": value "); value != std::string::npos) {
      const auto rule = line.find(": ", value + 8);
      if (rule != std::string::npos) line = line.substr(0, value) + line.substr(rule);
    }
    return "rule: " + line;
  }
  std::string message = error.what();
  if (const auto fix = message.find(" (fix:"); fix != std::string::npos) message.resize(fix);
  if (const auto end = message.find('\n'); end != std::string::npos) message.resize(end);
  return "rule: " + message;
}

}  // namespace ppctl::tune
