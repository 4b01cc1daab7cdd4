// Reading and validating a job spec: YAML (yaml-cpp) -> JobSpec. Every problem is collected, each as one
// line `FILE:LINE: YAML.PATH: value V: RULE (fix: HINT)`, and thrown once as a ppctl::ConfigError.
#include "config/load.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "config/data_paths.hpp"
#include "config/hf_config.hpp"
#include "config/schema.hpp"
#include "config/suggest.hpp"
#include "config/yaml_reader.hpp"
#include "core/error.hpp"

namespace ppctl::config {
namespace {

namespace fs = std::filesystem;
using namespace detail;

// ---------------------------------------------------------------------------------------------------------
// The loader: walks the document against the schema, then checks required keys and combinations.

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
    check_combinations();
    check_schedule();
  }

 private:
  /// SpecOverrides replace their fields here, before every check that spans fields; a value outside the
  /// field's range is a problem naming the option.
  void apply_overrides() {
    if (!overrides_.steps) return;
    const int64_t steps = *overrides_.steps;
    if (steps < 1 || steps > kMaxSteps) {
      c_.problems.add_option("--steps", std::to_string(steps), fmt::format("must be in [1, {}]", kMaxSteps),
                             "give a step count of at least 1");
      return;
    }
    spec_.train.steps = steps;
    if (const auto written = seen_.find("train.steps"); written != seen_.end()) written->second.ok = true;
  }

  /// How messages name train.steps: `train.steps (6)`, or `the step count (--steps 4)` when overridden.
  std::string steps_named() const {
    return overrides_.steps ? fmt::format("the step count (--steps {})", spec_.train.steps)
                            : fmt::format("train.steps ({})", spec_.train.steps);
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
             fmt::format("indent its keys below '{}:' (valid keys are {})", section.name, key_names(section)));
      return false;
    }
    walk_.for_each_key(e.value, section.name, key_names_vector(section), [&](const std::string& key, const Entry& entry) {
      const auto field = std::find_if(section.fields.begin(), section.fields.end(),
                                      [&](const Field& f) { return f.key == key; });
      return field->read(c_, entry);
    });
    return true;
  }

  static std::vector<std::string> key_names_vector(const Section& section) {
    std::vector<std::string> names;
    for (const auto& field : section.fields) names.push_back(field.key);
    return names;
  }
  static std::string key_names(const Section& section) { return join_names(key_names_vector(section)); }

  /// model.init_from: the folder made absolute, and its config.json merged into the model section. A
  /// field the spec does not write takes config.json's value (read by the field's own reader, so its
  /// range is checked); a written one must equal it, except seq_len, which may be shorter than the
  /// model's longest context. Each disagreement is a problem naming both values.
  void apply_init_from(const YAML::Node& root) {
    ModelSpec& m = spec_.model;
    if (m.init_from.empty() || !usable("model.init_from")) return;
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
      const auto field = std::find_if(model.fields.begin(), model.fields.end(),
                                      [&](const Field& candidate) { return candidate.key == f.key; });
      if (field == model.fields.end()) continue;  // a field this build does not have
      const auto written = seen_.find(path);
      if (written == seen_.end()) {
        const Entry entry{fmt::format("{} (from {} {})", path, file, f.source), line, YAML::Node(f.value)};
        seen_[path] = {line, field->read(c_, entry)};
        continue;
      }
      const YAML::Node node = root["model"][f.key];
      if (!written->second.ok || !node.IsScalar() || agrees(node.Scalar(), f.value, f.upper_bound)) continue;
      c_.problems.add(written->second.line, path, describe(node),
                      fmt::format("{} {} = {} in {} (model.init_from)",
                                  f.upper_bound ? "exceeds the model's longest context," : "differs from",
                                  f.source, f.value, file),
                      f.upper_bound ? fmt::format("write seq_len {} or less, or remove it", f.value)
                                    : fmt::format("remove {} to take it from config.json, or write {}", path,
                                                  f.value));
    }
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
    if (seen_.count("data.path") || seen_.count("data.blend") || !usable("data")) return;  // reported already
    const auto data = seen_.find("data");
    c_.problems.add(data != seen_.end() ? data->second.line : root_line, "data.path", std::nullopt,
                    "required key is missing", "name the training text, e.g. data: {path: corpus/*.txt}");
  }

  /// Resolves data.path or data.blend into data.sources (and data.files for text with data.path), with
  /// data.format and data.dtype as read. Marks the key unusable on a problem.
  void resolve_data() {
    DataSpec& d = spec_.data;
    if (!usable("data.format") || !usable("data.dtype")) return;
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

  /// model.vocab_size >= 256 when any source is text (bytes are ids 0..255).
  void check_vocab_covers_bytes() {
    const auto& sources = spec_.data.sources;
    const bool text = std::any_of(sources.begin(), sources.end(),
                                  [](const DataSource& s) { return s.format == DataFormat::Text; });
    if (text && usable("model.vocab_size") && spec_.model.vocab_size < 256) {
      combination_problem("model.vocab_size", "data.format", std::to_string(spec_.model.vocab_size),
                          "must be at least 256 with data.format text (the data are bytes, ids 0..255)",
                          "use vocab_size: 256 or more, or train on tokenized data (data.format tokens or megatron)");
    }
  }

  /// True when `path` and its section were either absent (default applies) or read without problems,
  /// so a combination check on it would not repeat an error already reported.
  bool usable(const std::string& path) const {
    const std::string section = path.substr(0, path.find('.'));
    for (const auto& p : {section, path}) {
      if (const auto it = seen_.find(p); it != seen_.end() && !it->second.ok) return false;
    }
    return true;
  }

  /// Reports a combination problem on `path` (the later key of the pair in the spec layout), at its line, or
  /// at the line of `other` when `path` was left at its default.
  void combination_problem(const std::string& path, const std::string& other, const std::string& value,
                           const std::string& rule, const std::string& hint) {
    const auto here = seen_.find(path);
    const bool present = here != seen_.end();
    const auto there = seen_.find(other);
    const int line = present ? here->second.line : there != seen_.end() ? there->second.line : 1;
    c_.problems.add(line, path, present ? value : value + " (default)", rule, hint);
  }

  /// Nearest divisors of `n` below and above `near` (e.g. 4 or 8 for n = 128, near = 5).
  static std::string divisors_near(int64_t n, int64_t near) {
    std::optional<int64_t> below;
    std::optional<int64_t> above;
    for (int64_t d = std::min(near, n); d >= 1 && !below; --d) {
      if (n % d == 0) below = d;
    }
    for (int64_t d = near + 1; d <= n && !above; ++d) {
      if (n % d == 0) above = d;
    }
    return one_or_two(below, above);
  }

  /// pipeline.virtual_stages defaults to 2 for the schedules that need several stages per rank.
  void apply_schedule_defaults() {
    PipelineSpec& p = spec_.pipeline;
    const bool chunked = p.schedule == ScheduleKind::ZBV || p.schedule == ScheduleKind::Interleaved1F1B;
    if (chunked && usable("pipeline.schedule") && !seen_.count("pipeline.virtual_stages")) p.virtual_stages = 2;
  }

  /// Every stage holds at least one layer: layers >= stages x virtual_stages. Reported on pipeline.stages
  /// when there is one stage per rank, else on pipeline.virtual_stages.
  void check_layers_cover_stages() {
    const ModelSpec& m = spec_.model;
    const PipelineSpec& p = spec_.pipeline;
    if (!usable("model.layers") || !usable("pipeline.stages") || !usable("pipeline.virtual_stages")) return;
    if (virtual_stages_problem()) return;  // reported by check_schedule
    if (p.virtual_stages == 1 && m.layers < p.stages) {
      combination_problem(
          "pipeline.stages", "model.layers", std::to_string(p.stages),
          fmt::format("must not exceed model.layers ({})", m.layers),
          fmt::format("use at most {} stages, or raise model.layers to {} or more", m.layers, p.stages));
    } else if (m.layers < p.stages * p.virtual_stages) {
      std::vector<std::string> fixes;  // only values inside each field's range
      if (p.stages * p.virtual_stages <= kMaxLayers)
        fixes.push_back(fmt::format("raise model.layers to {} or more", p.stages * p.virtual_stages));
      if (m.layers / p.virtual_stages >= 1)
        fixes.push_back(fmt::format("lower pipeline.stages to {}", m.layers / p.virtual_stages));
      if (p.schedule == ScheduleKind::Interleaved1F1B && m.layers / p.stages >= 2)
        fixes.push_back(fmt::format("lower pipeline.virtual_stages to {}", m.layers / p.stages));
      if (fixes.empty()) fixes.push_back("use fewer pipeline.stages or pipeline.virtual_stages");
      const std::string hint = fmt::format("{}", fmt::join(fixes, ", or "));
      combination_problem("pipeline.virtual_stages",
                          seen_.count("pipeline.stages") ? "pipeline.stages" : "pipeline.schedule",
                          std::to_string(p.virtual_stages),
                          fmt::format("pipeline.stages x pipeline.virtual_stages = {} x {} = {} stages must not exceed "
                                      "model.layers ({})",
                                      p.stages, p.virtual_stages, p.stages * p.virtual_stages, m.layers),
                          hint);
    }
  }

  /// The rule and hint pipeline.virtual_stages breaks for its schedule, if any: gpipe, 1f1b and zb-h1 run one
  /// stage per rank, zbv two, interleaved-1f1b two or more; custom schedules any number.
  std::optional<std::pair<std::string, std::string>> virtual_stages_problem() const {
    const PipelineSpec& p = spec_.pipeline;
    if (!usable("pipeline.schedule") || !usable("pipeline.virtual_stages")) return std::nullopt;
    switch (p.schedule) {
      case ScheduleKind::ZBV:
        if (p.virtual_stages == 2) return std::nullopt;
        return std::pair{std::string("must be 2 with schedule zbv (two stages per rank, in a V)"),
                         std::string("set pipeline.virtual_stages: 2, or leave it out (2 is zbv's default)")};
      case ScheduleKind::Interleaved1F1B:
        if (p.virtual_stages >= 2) return std::nullopt;
        return std::pair{std::string("must be at least 2 with schedule interleaved-1f1b"),
                         std::string("set pipeline.virtual_stages: 2 or more (2 is the default), or use schedule 1f1b")};
      case ScheduleKind::Custom:
        return std::nullopt;
      default:
        if (p.virtual_stages == 1) return std::nullopt;
        return std::pair{fmt::format("must be 1 with schedule {} (one stage per rank)", to_string(p.schedule)),
                         std::string("leave pipeline.virtual_stages out, or use schedule interleaved-1f1b or zbv for "
                                     "several stages per rank")};
    }
  }

  /// The schedule's own keys: stages per rank, the group size, and the file of a custom schedule.
  void check_schedule() {
    const PipelineSpec& p = spec_.pipeline;
    if (!usable("pipeline.schedule")) return;
    if (const auto problem = virtual_stages_problem()) {
      combination_problem("pipeline.virtual_stages", "pipeline.schedule", std::to_string(p.virtual_stages),
                          problem->first, problem->second);
    }
    if (usable("pipeline.microbatch_group_size") && p.microbatch_group_size != 0 &&
        p.schedule != ScheduleKind::Interleaved1F1B) {
      combination_problem("pipeline.microbatch_group_size", "pipeline.schedule",
                          std::to_string(p.microbatch_group_size),
                          fmt::format("only applies to schedule interleaved-1f1b (pipeline.schedule is {})",
                                      to_string(p.schedule)),
                          "leave pipeline.microbatch_group_size out, or set pipeline.schedule: interleaved-1f1b");
    }
    check_schedule_file();
  }

  /// pipeline.schedule_file: required with schedule custom, not allowed otherwise; resolved against the spec's
  /// folder to an absolute path naming a readable regular file.
  void check_schedule_file() {
    PipelineSpec& p = spec_.pipeline;
    const std::string path = "pipeline.schedule_file";
    if (!usable(path)) return;
    const bool custom = p.schedule == ScheduleKind::Custom;
    if (!custom && !p.schedule_file.empty()) {
      combination_problem(
          path, "pipeline.schedule", detail::quoted(p.schedule_file),
          fmt::format("is only read with schedule custom (pipeline.schedule is {})", to_string(p.schedule)),
          "leave pipeline.schedule_file out, or set pipeline.schedule: custom");
      return;
    }
    if (!custom) return;
    if (p.schedule_file.empty()) {
      const auto schedule = seen_.find("pipeline.schedule");
      c_.problems.add(
          schedule->second.line, path, std::nullopt,
          "required key is missing: schedule custom reads its actions from a CSV file",
          "add pipeline.schedule_file: my_schedule.csv (one row of actions per rank; see configs/README.md)");
      return;
    }
    const fs::path file = resolve_against(c_.base_dir, p.schedule_file);
    const std::string value = detail::quoted(p.schedule_file);
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0) {
      combination_problem(path, "pipeline.schedule", value,
                          fmt::format("names no readable file ({}: {})", file.string(), std::strerror(errno)),
                          "check the path; a relative path is resolved against " + c_.base_dir);
    } else if (!S_ISREG(info.st_mode)) {
      combination_problem(path, "pipeline.schedule", value,
                          S_ISDIR(info.st_mode) ? "names a folder, not a regular file"
                                                : "names a device, pipe or socket, not a regular file",
                          "name the CSV file itself");
    } else if (::access(file.c_str(), R_OK) != 0) {
      combination_problem(path, "pipeline.schedule", value,
                          fmt::format("cannot be read ({}: {})", file.string(), std::strerror(errno)),
                          "check the file's permissions");
    } else {
      p.schedule_file = file.string();
    }
  }

  /// The text must hold at least one training sequence: seq_len + 1 bytes over all data files.
  void check_data_covers_a_sequence() {
    if (!usable("data.path") || !usable("model.seq_len") || spec_.data.files.empty()) return;
    const std::uintmax_t bytes = text_bytes();
    const auto needed = static_cast<std::uintmax_t>(spec_.model.seq_len) + 1;
    if (bytes < needed) {
      combination_problem(
          "data.path", "model.seq_len", fmt::format("{} file(s), {} bytes", spec_.data.files.size(), bytes),
          fmt::format("must hold at least model.seq_len + 1 = {} bytes of text", needed),
          // model.seq_len is at least 1: lowering it is a fix only when the text holds 2 bytes or more.
          bytes >= 2 ? fmt::format("add text, or lower model.seq_len to {} or less", bytes - 1)
                     : fmt::format("add text: model.seq_len {} needs {} bytes (its smallest value, 1, needs 2)",
                                   spec_.model.seq_len, needed));
    }
  }

  /// eval.interval needs held-out text, and the split must leave sequences on both sides.
  void check_eval() {
    const double fraction = spec_.data.eval_fraction;
    if (usable("eval.interval") && usable("data.eval_fraction") && spec_.eval.interval > 0 && fraction == 0.0) {
      combination_problem("eval.interval", "data.eval_fraction", std::to_string(spec_.eval.interval),
                          "needs held-out text, but data.eval_fraction is 0",
                          "set data.eval_fraction: 0.05 (the last 5% of the sequences), or eval.interval: 0");
    }
    if (fraction == 0.0 || !usable("data.eval_fraction") || !usable("data.path") || !usable("model.seq_len")) return;
    const int64_t sequences = text_sequences();
    if (sequences < 0) return;  // too short for one sequence: reported by check_data_covers_a_sequence
    const int64_t held_out = held_out_sequences(sequences, fraction);
    if (sequences - held_out < 1) {
      combination_problem("data.eval_fraction", "data.path", fmt::format("{:g}", fraction),
                          fmt::format("leaves no training sequence: the text holds {} sequence(s) of "
                                      "model.seq_len + 1 bytes and {} would be held out",
                                      sequences, held_out),
                          "add text, lower model.seq_len, or set data.eval_fraction: 0");
    }
  }

  /// checkpoint.interval and checkpoint.keep need checkpoint.dir; the folder must be a folder (or not exist
  /// yet) under a writable parent.
  void check_checkpoint() {
    CheckpointSpec& k = spec_.checkpoint;
    if (k.dir.empty()) {
      for (const char* key : {"checkpoint.interval", "checkpoint.keep"}) {
        if (!seen_.count(key) || !usable(key)) continue;
        combination_problem(key, "checkpoint", key == std::string("checkpoint.interval") ? std::to_string(k.interval)
                                                                                          : std::to_string(k.keep),
                            "needs checkpoint.dir (the folder to write checkpoints to)",
                            "add checkpoint: {dir: checkpoints/my-job}");
      }
      return;
    }
    if (!usable("checkpoint.dir")) return;
    const std::string value = detail::quoted(k.dir);
    spec_.checkpoint.dir = resolve_against(c_.base_dir, k.dir);
    std::error_code ignored;
    fs::path existing = k.dir;
    while (!existing.empty() && !fs::exists(existing, ignored)) existing = existing.parent_path();
    if (existing == fs::path(k.dir) && !fs::is_directory(existing, ignored)) {
      combination_problem("checkpoint.dir", "checkpoint", value, "names a file, not a folder",
                          "name a folder (it is created when missing)");
    } else if (!existing.empty() && !fs::is_directory(existing, ignored)) {
      combination_problem("checkpoint.dir", "checkpoint", value,
                          fmt::format("lies under {}, which is a file, not a folder", existing.string()),
                          "name a folder (it is created when missing)");
    } else if (!existing.empty() && ::access(existing.c_str(), W_OK | X_OK) != 0) {
      combination_problem("checkpoint.dir", "checkpoint", value,
                          fmt::format("cannot be written: {} is not writable ({})", existing.string(),
                                      std::strerror(errno)),
                          "choose a folder you can write to, or fix its permissions");
    }
  }

  /// Bytes in the data files together.
  std::uintmax_t text_bytes() const {
    std::uintmax_t bytes = 0;
    for (const auto& file : spec_.data.files) {
      std::error_code ignored;
      const auto size = fs::file_size(file, ignored);
      if (!ignored) bytes += size;
    }
    return bytes;
  }

  /// Sequences of model.seq_len + 1 bytes (stride seq_len) in the data files; -1 when not even one.
  int64_t text_sequences() const {
    const std::uintmax_t bytes = text_bytes();
    const auto seq = static_cast<std::uintmax_t>(spec_.model.seq_len);
    return bytes < seq + 1 ? -1 : static_cast<int64_t>((bytes - 1) / seq);
  }

  /// optimizer.min_lr is a floor below optimizer.lr.
  void check_min_lr() {
    const OptimizerSpec& o = spec_.optimizer;
    if (usable("optimizer.min_lr") && usable("optimizer.lr") && o.min_lr > o.lr) {
      combination_problem("optimizer.min_lr", "optimizer.lr", fmt::format("{:g}", o.min_lr),
                          fmt::format("must not exceed optimizer.lr ({:g})", o.lr),
                          fmt::format("use a floor of at most {:g}, e.g. {:g}", o.lr, o.lr / 10));
    }
  }

  /// The learning-rate schedule fits in train.steps, and optimizer.min_lr is only written for a schedule that
  /// decays to it. Warmup (steps 0 .. warmup_steps - 1) reaches optimizer.lr at its last step, so a constant
  /// schedule needs warmup_steps <= train.steps; cosine and linear decay to min_lr over the steps after warmup
  /// (train/lr_schedule.cpp), so they need at least one: warmup_steps < train.steps.
  void check_lr_schedule() {
    const OptimizerSpec& o = spec_.optimizer;
    if (!usable("optimizer.lr_schedule")) return;
    const bool decays = o.lr_schedule != LrSchedule::Constant;
    const std::string schedule =
        to_string(o.lr_schedule) + (seen_.count("optimizer.lr_schedule") ? "" : ", the default");
    if (usable("optimizer.warmup_steps") && usable("train.steps")) {
      const int64_t steps = spec_.train.steps;
      const int64_t most = decays ? steps - 1 : steps;
      if (o.warmup_steps > most) {
        const std::string rule =
            decays ? fmt::format("must be below {} for lr_schedule {}: warmup would take every step, "
                                 "so the decay to optimizer.min_lr never happens",
                                 steps_named(), schedule)
                   : fmt::format("must not exceed {}: the run would end during warmup, before "
                                 "reaching optimizer.lr",
                                 steps_named());
        const std::string lower = most == 0 ? "set optimizer.warmup_steps: 0"
                                            : fmt::format("lower optimizer.warmup_steps to at most {}", most);
        const int64_t fewest = decays ? o.warmup_steps + 1 : o.warmup_steps;
        const std::string raise = overrides_.steps ? fmt::format("pass --steps {} or more", fewest)
                                                   : fmt::format("raise train.steps to at least {}", fewest);
        combination_problem("optimizer.warmup_steps", "train.steps", std::to_string(o.warmup_steps), rule,
                            fewest > kMaxSteps ? lower : lower + ", or " + raise);
      }
    }
    if (!decays && seen_.count("optimizer.min_lr") && usable("optimizer.min_lr")) {
      combination_problem("optimizer.min_lr", "optimizer.lr_schedule", fmt::format("{:g}", o.min_lr),
                          fmt::format("applies only to lr_schedule cosine or linear (lr_schedule is {})", schedule),
                          "remove optimizer.min_lr, or set optimizer.lr_schedule: cosine (or linear)");
    }
  }

  /// The model fields that belong to one architecture, grouped-query heads, RoPE's even head size, and
  /// model.tie_embeddings' per-architecture default (false for llama when not written).
  void check_arch_fields() {
    ModelSpec& m = spec_.model;
    if (!usable("model.arch")) return;
    const std::string arch = to_string(m.arch);
    const auto only_for = [&](const std::string& key, Arch owner, const std::string& value) {
      if (m.arch == owner || !seen_.count("model." + key)) return;
      combination_problem("model." + key, "model.arch", value,
                          fmt::format("applies only to model.arch {} (model.arch is {}{})", to_string(owner), arch,
                                      seen_.count("model.arch") ? "" : ", the default"),
                          fmt::format("remove model.{}, or set model.arch: {}", key, to_string(owner)));
    };
    only_for("activation", Arch::Gpt2, quoted(to_string(m.activation)));
    only_for("rope_theta", Arch::Llama, fmt::format("{:g}", m.rope_theta));
    only_for("kv_heads", Arch::Llama, std::to_string(m.kv_heads));
    if (m.arch == Arch::Llama && !seen_.count("model.tie_embeddings")) m.tie_embeddings = false;
    if (m.arch == Arch::Llama && usable("model.kv_heads") && usable("model.heads") && m.kv_heads > 0 &&
        m.heads % m.kv_heads != 0) {
      combination_problem("model.kv_heads", "model.heads", std::to_string(m.kv_heads),
                          fmt::format("must divide model.heads ({})", m.heads),
                          fmt::format("use a divisor of {} such as {}, or 0 for kv_heads = heads", m.heads,
                                      divisors_near(m.heads, m.kv_heads)));
    }
    if (m.arch == Arch::Llama && usable("model.hidden") && usable("model.heads") && m.hidden % m.heads == 0 &&
        (m.hidden / m.heads) % 2 != 0) {
      combination_problem("model.heads", "model.hidden", std::to_string(m.heads),
                          fmt::format("gives an odd head size hidden / heads = {}; rotary embeddings (llama) "
                                      "rotate pairs of features, so it must be even",
                                      m.hidden / m.heads),
                          "choose heads so that model.hidden / model.heads is even");
    }
  }

  /// pipeline.layers_per_stage: one entry per stage (stages x virtual_stages), summing to model.layers, and
  /// not together with balance auto (which chooses the split itself).
  void check_layer_split() {
    const PipelineSpec& p = spec_.pipeline;
    const std::string path = "pipeline.layers_per_stage";
    if (p.layers_per_stage.empty() || !usable(path)) return;
    const std::string value = fmt::format("[{}]", fmt::join(p.layers_per_stage, ", "));
    const auto count = static_cast<int64_t>(p.layers_per_stage.size());
    if (usable("pipeline.balance") && p.balance == "auto") {
      combination_problem(path, "pipeline.balance", value,
                          "excludes pipeline.balance auto (an explicit split, or one chosen by ppctl, not both)",
                          "remove pipeline.layers_per_stage to let balance auto choose, or remove balance: auto");
    }
    if (usable("pipeline.stages") && usable("pipeline.virtual_stages") && !virtual_stages_problem() &&
        count != p.stages * p.virtual_stages) {
      combination_problem(path, "pipeline.stages", value,
                          fmt::format("has {} entries but pipeline.stages x pipeline.virtual_stages = {} x {} = {}",
                                      count, p.stages, p.virtual_stages, p.stages * p.virtual_stages),
                          fmt::format("give one block count per stage ({} entries), in stage order",
                                      p.stages * p.virtual_stages));
    }
    int64_t sum = 0;
    for (const int64_t n : p.layers_per_stage) sum += n;
    if (usable("model.layers") && sum != spec_.model.layers) {
      combination_problem(path, "model.layers", value,
                          fmt::format("sums to {} but model.layers is {}", sum, spec_.model.layers),
                          fmt::format("make the entries add up to {} (or set model.layers: {})",
                                      spec_.model.layers, sum));
    }
  }

  void check_combinations() {
    const ModelSpec& m = spec_.model;
    const RuntimeSpec& r = spec_.runtime;
    check_layers_cover_stages();
    check_layer_split();
    check_min_lr();
    check_lr_schedule();
    check_data_covers_a_sequence();
    check_vocab_covers_bytes();
    check_eval();
    check_checkpoint();
    check_arch_fields();
    if (usable("model.hidden") && usable("model.heads") && m.hidden % m.heads != 0) {
      combination_problem("model.heads", "model.hidden", std::to_string(m.heads),
                          fmt::format("must divide model.hidden ({})", m.hidden),
                          fmt::format("use a divisor of {} such as {}", m.hidden, divisors_near(m.hidden, m.heads)));
    }
    if (usable("runtime.device") && usable("runtime.backend") && r.backend == Backend::Nccl &&
        r.device == Device::Cpu) {
      combination_problem("runtime.backend", "runtime.device", quoted(to_string(r.backend)),
                          fmt::format("needs runtime.device cuda (runtime.device is cpu{})",
                                      seen_.count("runtime.device") ? "" : ", the default"),
                          "use backend gloo or auto on cpu, or set runtime.device: cuda");
    }
    // bf16 on the wire under fp32 arithmetic would round an otherwise exact fp32 step: refused.
    if (usable("runtime.p2p_dtype") && usable("runtime.precision") && r.p2p_dtype == P2pDtype::Bf16 &&
        r.precision == Precision::Fp32) {
      combination_problem("runtime.p2p_dtype", "runtime.precision", quoted(to_string(r.p2p_dtype)),
                          fmt::format("needs runtime.precision bf16 (runtime.precision is fp32{})",
                                      seen_.count("runtime.precision") ? "" : ", the default"),
                          "set runtime.precision: bf16, or p2p_dtype auto or fp32");
    }
  }

  JobSpec& spec_;
  Context& c_;
  const SpecOverrides& overrides_;
  DataEntries data_entries_;
  std::vector<Section> sections_;
  SeenKeys seen_;
  KeyWalk walk_{c_, seen_, [this](const std::string& name, const std::string& prefix,
                                  const std::vector<std::string>& known) {
                  return unknown_key_hint(sections_, name, prefix, known);
                }};
};


}  // namespace

JobSpec parse_job_spec(const std::string& yaml_text, const std::string& source_name, const std::string& base_dir,
                       const SpecOverrides& overrides) {
  Problems problems(source_name);
  std::vector<YAML::Node> documents;
  try {
    refuse_stuck_documents(yaml_text);
    documents = YAML::LoadAll(yaml_text);
  } catch (const YAML::Exception& e) {
    const int line = line_of(e.mark);
    problems.add(line, "", std::nullopt, "invalid YAML: " + e.msg,
                 fmt::format("check the indentation, quoting and brackets on line {} and just above it", line));
    problems.throw_if_any();
  }

  JobSpec spec;
  spec.source = source_name;
  Context context{problems, fs::absolute(base_dir.empty() ? "." : base_dir).lexically_normal().string()};
  if (context.base_dir.size() > 1 && context.base_dir.back() == '/') context.base_dir.pop_back();

  if (documents.empty() || documents[0].IsNull()) {
    problems.add(1, "", std::nullopt, "the spec is empty",
                 "write at least data: {path: ...}; configs/README.md has a full example");
  } else if (!documents[0].IsMap()) {
    problems.add(line_of(documents[0]), "", describe(documents[0]),
                 "the spec must be a mapping of sections (model, pipeline, data, optimizer, train, eval, checkpoint, runtime, observe)",
                 "start each section at the left margin, e.g. 'model:' with its keys indented below");
  } else {
    Loader(spec, context, overrides).read(documents[0]);
  }
  if (documents.size() > 1) {
    problems.add(line_of(documents[1]), "", std::nullopt,
                 fmt::format("the file holds {} YAML documents; a spec is one", documents.size()),
                 "remove the '---' separator and everything after it, or merge the documents");
  }
  problems.throw_if_any();
  return spec;
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

JobSpec load_job_spec(const std::string& path, const SpecOverrides& overrides) {
  const auto fail = [&path](const std::string& why) {
    throw ConfigError({fmt::format("{}: cannot read the spec: {} (fix: check the path and its permissions)", path,
                                   why)});
  };
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail("it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail(std::strerror(errno));
  const fs::path parent = fs::path(path).parent_path();
  return parse_job_spec(text.str(), path, parent.empty() ? "." : parent.string(), overrides);
}

}  // namespace ppctl::config
