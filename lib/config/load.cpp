// Reading and validating a job spec: YAML (yaml-cpp) -> JobSpec. The loader walks the document against the
// schema (schema.hpp), then applies overrides, data paths, model.init_from and defaults and checks the rules
// (rules.hpp). Every problem is collected, each as one line `FILE:LINE: YAML.PATH: value V: RULE (fix: HINT)`,
// and thrown once as a ppctl::ConfigError.
#include "config/load.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "config/data_paths.hpp"
#include "config/hf_config.hpp"
#include "config/rules.hpp"
#include "config/schema.hpp"
#include "config/suggest.hpp"
#include "config/yaml_reader.hpp"
#include "core/echo.hpp"
#include "core/error.hpp"

namespace ppctl::config {
namespace {

namespace fs = std::filesystem;
using namespace detail;

// ---------------------------------------------------------------------------------------------------------
// The loader: walks the document against the schema, then checks required keys and the rules.

class Loader {
 public:
  Loader(JobSpec& spec, Context& context, const SpecOverrides& overrides)
      : spec_(spec), c_(context), overrides_(overrides), sections_(schema(spec, data_entries_)) {}

  /// Reads the root mapping and every section, then the checks that span keys.
  void read(const YAML::Node& root) {
    std::vector<std::string> names;
    for (const auto& section : sections_) names.push_back(section.name);
    walk_.for_each_key(root, "", names, [&](const std::string& name, const Entry& e) {
      return read_section(section_named(name), e);
    });
    apply_overrides();
    resolve_data();
    apply_init_from(root);
    check_required(line_of(root));
    apply_schedule_defaults();
    check_rules(state_);
  }

 private:
  /// SpecOverrides replace their fields here, before every check that spans fields; a value outside the
  /// field's range (the schema's) is a problem naming the option.
  void apply_overrides() {
    if (!overrides_.steps) return;
    const int64_t steps = *overrides_.steps;
    const IntRange& range = *section_named("train").field("steps")->ints;
    if (!range.contains(steps)) {
      c_.problems.add_option("--steps", std::to_string(steps), "must be in " + range.text(),
                             "give a step count of at least 1");
      return;
    }
    spec_.train.steps = steps;
    if (const auto written = seen_.find("train.steps"); written != seen_.end()) written->second.ok = true;
  }

  const Section& section_named(const std::string& name) const {
    return *std::find_if(sections_.begin(), sections_.end(), [&](const Section& s) { return s.name == name; });
  }

  /// Reads one section: null (no keys) is fine, anything else must be a mapping. Returns whether it was one;
  /// each key's own result is recorded by the walk.
  bool read_section(const Section& section, const Entry& e) {
    if (e.value.IsNull()) return true;
    if (!e.value.IsMap()) {
      c_.bad(e, "must be a mapping of keys",
             fmt::format("indent its keys below '{}:' (valid keys are {})", section.name,
                         join_names(section.keys())));
      return false;
    }
    walk_.for_each_key(e.value, section.name, section.keys(), [&](const std::string& key, const Entry& entry) {
      return section.field(key)->read(c_, entry);
    });
    return true;
  }

  /// model.init_from: the folder made absolute, and its config.json merged into the model section. A
  /// field the spec does not write takes config.json's value (read by the field's own reader, so its
  /// range is checked); a written one must equal it, except seq_len, which may be shorter than the
  /// model's longest context. Each disagreement is a problem naming both values.
  void apply_init_from(const YAML::Node& root) {
    ModelSpec& m = spec_.model;
    if (m.init_from.empty() || !state_.usable("model.init_from")) return;
    m.init_from = resolve_against(c_.base_dir, m.init_from);
    const int line = seen_.at("model.init_from").line;
    std::error_code ec;
    if (fs::is_regular_file(m.init_from, ec)) {
      c_.problems.add(line, "model.init_from", (quoted)(m.init_from), "is a file, not a folder",
                      fmt::format("name the folder holding config.json and the safetensors files, e.g. {}",
                                  fs::path(m.init_from).parent_path().string()));
      return;
    }
    HfModelConfig hf;
    try {
      hf = read_hf_model_config(m.init_from);
    } catch (const Error& e) {
      c_.problems.add_with_fix(line, "model.init_from", (quoted)(m.init_from), e.what());
      return;
    }
    const Section& model = section_named("model");
    const std::string file = (fs::path(m.init_from) / "config.json").string();
    for (const auto& f : hf.fields) {
      const std::string path = "model." + f.key;
      const Field* field = model.field(f.key);
      if (field == nullptr) continue;  // a field this build does not have
      const auto written = seen_.find(path);
      // A mapping (rope_scaling) comes as JSON text, which YAML reads as a flow mapping.
      const YAML::Node given = field->type == FieldType::Mapping ? YAML::Load(f.value) : YAML::Node(f.value);
      if (written == seen_.end()) {
        const Entry entry{fmt::format("{} (from {} {})", path, file, f.source), line, given};
        seen_[path] = {line, field->read(c_, entry), entry.path};  // rules name config.json, not the spec
        continue;
      }
      const YAML::Node node = root["model"][f.key];
      if (!written->second.ok) continue;
      if (field->type == FieldType::Mapping ? same_mapping(*field, node, given)
                                            : !node.IsScalar() || agrees(node.Scalar(), f.value, f.upper_bound)) {
        continue;
      }
      c_.problems.add(written->second.line, path, describe(node),
                      fmt::format("{} {} = {} in {} (model.init_from)",
                                  f.upper_bound ? "exceeds the model's longest context," : "differs from",
                                  f.source, f.value, file),
                      f.upper_bound ? fmt::format("write seq_len {} or less, or remove it", f.value)
                                    : fmt::format("remove {} to take it from config.json, or write {}", path,
                                                  f.value));
    }
  }

  /// A mapping field (model.rope_scaling, the only one) written in the spec reads as the same value as
  /// config.json's: `field`'s reader run on each into a scratch spec (the written one was checked already).
  static bool same_mapping(const Field& field, const YAML::Node& written, const YAML::Node& given) {
    const auto read = [&](const YAML::Node& node) {
      JobSpec scratch;
      DataEntries entries;
      Problems problems("");
      Context c{problems, ""};
      for (const Section& section : schema(scratch, entries)) {
        if (const Field* f = section.field(field.key); f != nullptr && section.name == "model") f->read(c, {"", 0, node});
      }
      return scratch.model;
    };
    return read(written).rope_scaling == read(given).rope_scaling;
  }

  /// `written` agrees with config.json's `given`: the same number or text, or for an upper bound a
  /// number no larger.
  static bool agrees(const std::string& written, const std::string& given, bool upper_bound) {
    double a = 0, b = 0;
    if (parse_double(written, a) == Parse::Ok && parse_double(given, b) == Parse::Ok) {
      return upper_bound ? a <= b : a == b;
    }
    return written == given;
  }

  /// data.path (or data.blend) is the only required key.
  void check_required(int root_line) {
    if (seen_.count("data.path") || seen_.count("data.blend") || !state_.usable("data")) return;  // reported already
    const auto data = seen_.find("data");
    c_.problems.add(data != seen_.end() ? data->second.line : root_line, "data.path", std::nullopt,
                    "required key is missing", "name the training text, e.g. data: {path: corpus/*.txt}");
  }

  /// Resolves data.path or data.blend into data.sources (and data.files for text with data.path), with
  /// data.format and data.dtype as read. Marks the key unusable on a problem.
  void resolve_data() {
    DataSpec& d = spec_.data;
    if (!state_.usable("data.format") || !state_.usable("data.dtype")) return;
    if (data_entries_.path && data_entries_.blend) {
      c_.problems.add(data_entries_.blend->line, "data.blend", std::nullopt,
                      "data.path and data.blend exclude each other",
                      "keep data.path for one corpus, or move it into data.blend as {weight: 1, path: ...}");
      seen_["data.blend"].ok = false;
      return;
    }
    if (data_entries_.path) {
      DataSource source{1.0, d.format, d.dtype, "", {}};
      bool ok = true;
      if (d.format == DataFormat::Text) {
        ok = read_data_paths(c_, *data_entries_.path, d.paths, d.files);
        source.path = fmt::format("{}", fmt::join(d.paths, ", "));
        source.files = d.files;
      } else {
        ok = read_source_path(c_, *data_entries_.path, source);
        d.paths = {source.path};
      }
      if (ok) d.sources.push_back(std::move(source));
      seen_["data.path"].ok = ok;
    }
    if (data_entries_.blend) seen_["data.blend"].ok = read_blend(c_, walk_, *data_entries_.blend, spec_.data);
  }

  /// pipeline.virtual_stages defaults to 2 for the schedules that need several stages per rank.
  void apply_schedule_defaults() {
    PipelineSpec& p = spec_.pipeline;
    const bool chunked = p.schedule == ScheduleKind::ZBV || p.schedule == ScheduleKind::Interleaved1F1B;
    if (chunked && state_.usable("pipeline.schedule") && !seen_.count("pipeline.virtual_stages")) {
      p.virtual_stages = 2;
    }
  }

  JobSpec& spec_;
  Context& c_;
  const SpecOverrides& overrides_;
  DataEntries data_entries_;
  std::vector<Section> sections_;
  SpecState state_{spec_, c_, {}, overrides_.steps.has_value()};
  SeenKeys& seen_ = state_.seen;
  KeyWalk walk_{c_, seen_, [this](const std::string& name, const std::string& prefix,
                                  const std::vector<std::string>& known) {
                  return unknown_key_hint(sections_, name, prefix, known);
                }};
};

/// Throws the ConfigError for the spec `source` of `bytes` bytes, over kMaxSpecBytes (nullopt: a file whose size
/// is unknown, e.g. a pipe, that gave more than that).
[[noreturn]] void refuse_oversized_spec(const std::string& source, std::optional<std::uintmax_t> bytes) {
  const std::string size = bytes ? fmt::format("{} bytes ({:.1f} MiB)", *bytes, static_cast<double>(*bytes) / (1 << 20))
                                 : std::string("more than that");
  throw ConfigError({fmt::format("{}: the spec is {}, over the limit of {} bytes (1 MiB) that ppctl reads (fix: keep "
                                 "long lists out of the spec: data.path takes globs such as corpus/*.txt instead of "
                                 "one entry per file, and many small datasets can be made one with `ppctl data "
                                 "prepare`; comments count too)",
                                 source, size, kMaxSpecBytes)});
}

/// The first line, up to `last` (1-based, or the line after it), whose leading whitespace holds a tab; 0 when none.
int first_tab_indented_line(const std::string& text, int last) {
  int line = 1;
  bool leading = true;  // still in the line's leading whitespace
  for (const char c : text) {
    if (line > last + 1) break;
    if (c == '\n') {
      ++line;
      leading = true;
    } else if (leading && c == '\t') {
      return line;
    } else if (c != ' ') {
      leading = false;
    }
  }
  return 0;
}

/// The line of the first TOML table header (`[job]`, `[[blend]]`) when `text` reads as TOML: such a header and a
/// `key = value` line, each on a line of its own. 0 when it does not (YAML has neither at the left margin of a
/// spec: `[a, b]` is a list, and `key = value` a plain string, neither valid where a section starts).
int toml_table_line(const std::string& text) {
  static const std::regex header(R"(^\s*\[\[?\s*[A-Za-z0-9_.\-" ]+\s*\]\]?\s*(#.*)?$)");
  static const std::regex assignment(R"(^\s*[A-Za-z0-9_.\-"]+\s*=\s*\S)");
  std::istringstream lines(text);
  int line = 0, first_header = 0;
  bool assigns = false;
  for (std::string row; std::getline(lines, row);) {
    ++line;
    if (first_header == 0 && std::regex_search(row, header)) first_header = line;
    assigns = assigns || std::regex_search(row, assignment);
  }
  return assigns ? first_header : 0;
}

/// Whether `text` has a line that starts a YAML document (`---`) or ends one (`...`).
bool has_document_marker(const std::string& text) {
  static const std::regex marker(R"(^(---|\.\.\.)(\s.*)?$)");
  std::istringstream lines(text);
  for (std::string row; std::getline(lines, row);)
    if (std::regex_search(row, marker)) return true;
  return false;
}

}  // namespace

JobSpec parse_job_spec(const std::string& yaml_text, const std::string& source_name, const std::string& base_dir,
                       const SpecOverrides& overrides) {
  Problems problems(source_name);
  if (yaml_text.size() > kMaxSpecBytes) refuse_oversized_spec(source_name, yaml_text.size());
  std::vector<YAML::Node> documents;
  if (const int line = toml_table_line(yaml_text); line > 0) {
    // torchtitan's job files are TOML: YAML would report the first `key = value` as a syntax error.
    problems.add(line, "", std::nullopt,
                 "the file is TOML ([table] headers and key = value lines, as torchtitan's configs), not YAML",
                 "write the job spec in YAML: a section name ending in ':' at the left margin and 'key: value' lines "
                 "indented below it; `ppctl help` lists the sections and fields, and the spec names torchtitan's keys "
                 "where they differ");
    problems.throw_if_any();
  }
  try {
    refuse_stuck_documents(yaml_text);
    documents = YAML::LoadAll(yaml_text);
  } catch (const YAML::DeepRecursion& e) {  // yaml-cpp's own guard says only "bad file"
    const int line = line_of(e.mark);
    problems.add(line, "", std::nullopt,
                 fmt::format("invalid YAML: nested {} levels deep, more than the YAML reader allows", e.depth()),
                 "a spec nests a few levels; check the brackets on this line");
    problems.throw_if_any();
  } catch (const YAML::Exception& e) {
    const int line = line_of(e.mark);
    // yaml-cpp names a tab in the indentation "illegal map value" or "illegal tab when looking for
    // indentation"; the first such line up to the error is the likely cause.
    if (const auto tab = first_tab_indented_line(yaml_text, line); tab > 0) {
      problems.add(tab, "", std::nullopt, fmt::format("line {} is indented with a tab; YAML allows only spaces", tab),
                   "indent with spaces, e.g. two per level");
    } else {
      // yaml-cpp's message may quote a character of the spec (an unknown escape "\<ESC>"): shown escaped.
      problems.add(line, "", std::nullopt, "invalid YAML: " + core::escape_control(e.msg),
                   fmt::format("check the indentation, quoting and brackets on line {} and just above it", line));
    }
    problems.throw_if_any();
  }

  JobSpec spec;
  spec.source = source_name;
  Context context{problems, fs::absolute(base_dir.empty() ? "." : base_dir).lexically_normal().string()};
  if (context.base_dir.size() > 1 && context.base_dir.back() == '/') context.base_dir.pop_back();

  // `{...}` then another `{...}` (two JSON objects, say): the first alone is not the spec meant, so its missing
  // keys would only mislead; the second value is the one problem.
  const bool second_value = documents.size() > 1 && !has_document_marker(yaml_text);
  if (second_value) {
    problems.add(line_of(documents[1]), "", describe(documents[1]),
                 fmt::format("a second top-level value starts here ({} in all); a spec is one mapping",
                             documents.size()),
                 "merge them into one mapping of sections (in JSON, one {...} object holding every section)");
  } else if (documents.empty() || documents[0].IsNull()) {
    problems.add(1, "", std::nullopt, "the spec is empty",
                 "write at least data: {path: ...}; configs/example.yaml is a full example");
  } else if (!documents[0].IsMap()) {
    problems.add(line_of(documents[0]), "", describe(documents[0]),
                 "the spec must be a mapping of sections (model, pipeline, data, optimizer, train, eval, checkpoint, runtime, observe)",
                 "start each section at the left margin, e.g. 'model:' with its keys indented below");
  } else {
    Loader(spec, context, overrides).read(documents[0]);
  }
  if (documents.size() > 1 && !second_value) {
    problems.add(line_of(documents[1]), "", std::nullopt,
                 fmt::format("the file holds {} YAML documents; a spec is one", documents.size()),
                 "remove the '---' separator and everything after it, or merge the documents");
  }
  problems.throw_if_any();
  return spec;
}

std::pair<int64_t, int64_t> integer_field_range(const std::string& field) {
  JobSpec spec;
  DataEntries entries;
  const auto dot = field.find('.');
  for (const Section& section : schema(spec, entries)) {
    if (dot == std::string::npos || section.name != field.substr(0, dot)) continue;
    const Field* row = section.field(field.substr(dot + 1));
    if (row != nullptr && row->ints && row->type == FieldType::Integer) return {row->ints->lo, row->ints->hi};
  }
  throw std::invalid_argument("not an integer field of the job spec: " + field);
}

std::string field_location(const std::string& yaml_text, const std::string& source_name, const std::string& field) {
  try {
    // Each step down is a new Node in `nodes` (yaml-cpp's Node::operator= would rewrite the tree instead).
    std::vector<YAML::Node> nodes{YAML::Load(yaml_text)};
    int line = 0;
    std::stringstream parts(field);
    for (std::string part; std::getline(parts, part, '.');) {
      const auto bracket = part.find('[');  // `blend[1]`: the key, then its list item
      const std::string key = part.substr(0, bracket);
      if (!nodes.back().IsMap()) return source_name;
      std::optional<YAML::Node> value;
      for (const auto& pair : nodes.back()) {
        if (!value && pair.first.IsScalar() && pair.first.Scalar() == key) {
          line = line_of(pair.first);
          value.emplace(pair.second);
        }
      }
      if (!value) return source_name;
      nodes.push_back(*value);
      if (bracket != std::string::npos) {
        const auto index = static_cast<size_t>(std::stoul(part.substr(bracket + 1)));
        if (!nodes.back().IsSequence() || index >= nodes.back().size()) return source_name;
        nodes.push_back(nodes.back()[index]);
        line = line_of(nodes.back());
      }
    }
    return line > 0 ? fmt::format("{}:{}", source_name, line) : source_name;
  } catch (const std::exception&) {  // not YAML, or not a path of it: the file alone
    return source_name;
  }
}

std::string read_spec_file(const std::string& path) {
  const auto fail = [&path](const std::string& why) {
    throw ConfigError({fmt::format("{}: cannot read the spec: {} (fix: check the path and its permissions)", path,
                                   why)});
  };
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail("it is a directory");
  if (const auto size = fs::file_size(path, ec); !ec && size > kMaxSpecBytes) refuse_oversized_spec(path, size);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(std::strerror(errno));
  std::string text(kMaxSpecBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) fail(std::strerror(errno));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxSpecBytes) refuse_oversized_spec(path, std::nullopt);  // grew, or not a regular file
  return text;
}

JobSpec load_job_spec(const std::string& path, const SpecOverrides& overrides) {
  const std::string text = read_spec_file(path);
  const fs::path parent = fs::path(path).parent_path();
  return parse_job_spec(text, path, parent.empty() ? "." : parent.string(), overrides);
}

}  // namespace ppctl::config
