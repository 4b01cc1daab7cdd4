// Tests for config/: YAML job specs -> JobSpec, every validation rule and its one-line message, and did-you-mean.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "config/suggest.hpp"
#include "core/echo.hpp"
#include "core/error.hpp"
#include "support/readme.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;
using namespace ppctl::config;

namespace {

/// 400 bytes of text: more than model.seq_len + 1 for the default seq_len (128).
const std::string kText = std::string(399, 'a') + "\n";

/// A fresh folder under the system temp dir, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ppctl_config_test_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

  /// Writes `content` to `relative` (creating folders) and returns the absolute path. The default
  /// text is longer than the default model.seq_len, so a spec using it is valid.
  fs::path write(const std::string& relative, const std::string& content = kText) const {
    const fs::path file = path_ / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << content;
    return file;
  }

 private:
  fs::path path_;
};

/// A folder holding `corpus.txt`, shared by tests that need a valid data.path but test something else.
/// It holds 1,000,001 bytes: enough for the largest model.seq_len (1,000,000).
const TempDir& corpus_dir() {
  static const TempDir dir;
  static const bool written = (dir.write("corpus.txt", std::string(1000000, 'a') + "\n"), true);
  (void)written;
  return dir;
}

/// `yaml` followed by a valid data section (appended, so the lines of `yaml` keep their numbers).
std::string with_data(const std::string& yaml) { return yaml + "data: {path: corpus.txt}\n"; }

/// The problems parse_job_spec reports for `yaml` (source name `job.yaml`); fails the test if it accepts it.
std::vector<std::string> problems_of(const std::string& yaml, const std::string& base_dir = corpus_dir().str()) {
  try {
    parse_job_spec(yaml, "job.yaml", base_dir);
  } catch (const ppctl::ConfigError& e) {
    REQUIRE_FALSE(e.problems().empty());
    return e.problems();
  }
  FAIL("expected a ConfigError for:\n" << yaml);
  return {};
}

/// One problem line split into its fields: `FILE:LINE: PATH: value VALUE: RULE (fix: HINT)`.
struct Message {
  std::string file;
  int line = 0;
  std::string path;
  std::optional<std::string> value;
  std::string rule;
  std::string hint;
};

/// Splits a problem line that has a YAML path (values in these tests hold no ": ").
Message split(const std::string& text) {
  INFO("message: " << text);
  Message m;
  const auto file_end = text.find(':');
  const auto line_end = text.find(": ", file_end + 1);
  REQUIRE(file_end != std::string::npos);
  REQUIRE(line_end != std::string::npos);
  m.file = text.substr(0, file_end);
  m.line = std::stoi(text.substr(file_end + 1, line_end - file_end - 1));
  std::string rest = text.substr(line_end + 2);
  const auto path_end = rest.find(": ");
  REQUIRE(path_end != std::string::npos);
  m.path = rest.substr(0, path_end);
  rest = rest.substr(path_end + 2);
  if (rest.rfind("value ", 0) == 0) {
    const auto value_end = rest.find(": ");
    REQUIRE(value_end != std::string::npos);
    m.value = rest.substr(6, value_end - 6);
    rest = rest.substr(value_end + 2);
  }
  const auto fix = rest.rfind(" (fix: ");
  REQUIRE(fix != std::string::npos);
  REQUIRE(rest.back() == ')');
  m.rule = rest.substr(0, fix);
  m.hint = rest.substr(fix + 7, rest.size() - fix - 8);
  return m;
}

/// The single problem reported for `yaml`, split into fields.
Message only_problem(const std::string& yaml, const std::string& base_dir = corpus_dir().str()) {
  const auto problems = problems_of(yaml, base_dir);
  INFO("yaml:\n" << yaml);
  REQUIRE(problems.size() == 1);
  return split(problems[0]);
}

/// Checks every field except the hint.
void check(const Message& m, int line, const std::string& path, const std::optional<std::string>& value,
           const std::string& rule) {
  CHECK(m.file == "job.yaml");
  CHECK(m.line == line);
  CHECK(m.path == path);
  CHECK(m.value.value_or("<no value>") == value.value_or("<no value>"));
  CHECK(m.rule == rule);
}

/// `section:\n  key: value\n` for a dotted `section.key`: the key sits on line 2.
std::string one_key(const std::string& dotted, const std::string& value) {
  const auto dot = dotted.find('.');
  return dotted.substr(0, dot) + ":\n  " + dotted.substr(dot + 1) + ": " + value + "\n";
}

JobSpec parse_ok(const std::string& yaml, const std::string& base_dir = corpus_dir().str()) {
  INFO("yaml:\n" << yaml);
  try {
    return parse_job_spec(yaml, "job.yaml", base_dir);
  } catch (const ppctl::ConfigError& e) {
    FAIL("unexpected ConfigError:\n" << e.what());
  }
  return {};
}

}  // namespace

// ------------------------------------------------------------------------------------------------------------
// Valid specs.

TEST_CASE("a full valid spec round-trips every field", "[config]") {
  const TempDir dir;
  const fs::path a = dir.write("text/a.txt");
  const fs::path b = dir.write("text/b.txt");
  const fs::path extra = dir.write("extra.bin");
  const std::string yaml = R"(# a full spec
model:
  vocab_size: 512
  layers: 12
  hidden: 96
  heads: 6
  seq_len: 64
  dropout: 0.25
pipeline:
  stages: 3
  schedule: gpipe
  microbatches: 8
  micro_batch_size: 2
data:
  path:
    - text/*.txt
    - )" + extra.string() + R"(
optimizer:
  lr: 3.0e-4
  betas: [0.8, 0.99]
  eps: 1e-6
  weight_decay: 0
train:
  steps: 250
  seed: 9223372036854775807
  log_interval: 5
runtime:
  device: cuda
  backend: nccl
  master_addr: node01
  master_port: 29500
  comm_timeout_s: 12.5
  threads_per_worker: 2
)";
  const JobSpec spec = parse_ok(yaml, dir.str());
  CHECK(spec.source == "job.yaml");
  CHECK(spec.model.vocab_size == 512);
  CHECK(spec.model.layers == 12);
  CHECK(spec.model.hidden == 96);
  CHECK(spec.model.heads == 6);
  CHECK(spec.model.seq_len == 64);
  CHECK(spec.model.dropout == 0.25);
  CHECK(spec.pipeline.stages == 3);
  CHECK(spec.pipeline.schedule == ScheduleKind::GPipe);
  CHECK(spec.pipeline.microbatches == 8);
  CHECK(spec.pipeline.micro_batch_size == 2);
  CHECK(spec.data.paths == std::vector<std::string>{"text/*.txt", extra.string()});
  CHECK(spec.data.files == std::vector<std::string>{extra.string(), a.string(), b.string()});
  CHECK(spec.optimizer.lr == 3.0e-4);
  CHECK(spec.optimizer.beta1 == 0.8);
  CHECK(spec.optimizer.beta2 == 0.99);
  CHECK(spec.optimizer.eps == 1e-6);
  CHECK(spec.optimizer.weight_decay == 0.0);
  CHECK(spec.train.steps == 250);
  CHECK(spec.train.seed == 9223372036854775807ULL);
  CHECK(spec.train.log_interval == 5);
  CHECK(spec.runtime.device == Device::Cuda);
  CHECK(spec.runtime.backend == Backend::Nccl);
  CHECK(spec.runtime.master_addr == "node01");
  CHECK(spec.runtime.master_port == 29500);
  CHECK(spec.runtime.comm_timeout_s == 12.5);
  CHECK(spec.runtime.threads_per_worker == 2);
}

TEST_CASE("omitted keys take the documented defaults", "[config]") {
  const JobSpec spec = parse_ok("data:\n  path: corpus.txt\n");
  CHECK(spec.model.vocab_size == 256);
  CHECK(spec.model.layers == 4);
  CHECK(spec.model.hidden == 128);
  CHECK(spec.model.heads == 4);
  CHECK(spec.model.seq_len == 128);
  CHECK(spec.model.dropout == 0.0);
  CHECK(spec.pipeline.stages == 1);
  CHECK(spec.pipeline.schedule == ScheduleKind::OneFOneB);
  CHECK(spec.pipeline.microbatches == 1);
  CHECK(spec.pipeline.micro_batch_size == 1);
  CHECK(spec.pipeline.virtual_stages == 1);
  CHECK(spec.pipeline.microbatch_group_size == 0);
  CHECK(spec.pipeline.schedule_file.empty());
  CHECK(spec.data.paths == std::vector<std::string>{"corpus.txt"});
  CHECK(spec.data.files == std::vector<std::string>{(corpus_dir().path() / "corpus.txt").string()});
  CHECK(spec.optimizer.lr == 1e-3);
  CHECK(spec.optimizer.beta1 == 0.9);
  CHECK(spec.optimizer.beta2 == 0.95);
  CHECK(spec.optimizer.eps == 1e-8);
  CHECK(spec.optimizer.weight_decay == 0.1);
  CHECK(spec.train.steps == 100);
  CHECK(spec.train.seed == 0);
  CHECK(spec.train.log_interval == 10);
  CHECK(spec.runtime.device == Device::Cpu);
  CHECK(spec.runtime.backend == Backend::Auto);
  CHECK(spec.runtime.master_addr == "127.0.0.1");
  CHECK(spec.runtime.master_port == 0);
  CHECK(spec.runtime.comm_timeout_s == 300.0);
  CHECK(spec.runtime.threads_per_worker == 1);
}

TEST_CASE("empty sections and a partly filled section keep the other defaults", "[config]") {
  const JobSpec spec = parse_ok(with_data("model:\npipeline: {}\ntrain:\n  steps: 7\n"));
  CHECK(spec.model.layers == 4);
  CHECK(spec.pipeline.stages == 1);
  CHECK(spec.train.steps == 7);
  CHECK(spec.train.log_interval == 10);
}

TEST_CASE("the ends of every range are accepted where the range is closed", "[config][range]") {
  const JobSpec high = parse_ok(with_data(R"(model: {vocab_size: 1000000, layers: 10000, hidden: 65536, heads: 65536,
        seq_len: 1000000, dropout: 0.999}
pipeline: {stages: 1024, microbatches: 1000000, micro_batch_size: 1000000}
optimizer: {lr: 10, betas: [0.999, 0.999], eps: 1, weight_decay: 10}
train: {steps: 1000000000, seed: 9223372036854775807, log_interval: 1000000000}
runtime: {master_port: 65535, comm_timeout_s: 86400, threads_per_worker: 1024}
)"));
  CHECK(high.model.vocab_size == 1000000);
  CHECK(high.model.layers == 10000);
  CHECK(high.model.heads == 65536);
  CHECK(high.pipeline.stages == 1024);
  CHECK(high.optimizer.lr == 10.0);
  CHECK(high.train.steps == 1000000000);
  CHECK(high.runtime.master_port == 65535);
  CHECK(high.runtime.comm_timeout_s == 86400.0);
  CHECK(high.runtime.threads_per_worker == 1024);

  const JobSpec low = parse_ok(with_data(R"(model: {vocab_size: 256, layers: 1, hidden: 1, heads: 1, seq_len: 1, dropout: 0}
pipeline: {stages: 1, microbatches: 1, micro_batch_size: 1}
optimizer: {lr: 1e-12, betas: [0, 0], eps: 1e-30, weight_decay: 0}
train: {steps: 1, seed: 0, log_interval: 1}
runtime: {master_port: 0, comm_timeout_s: 0.001, threads_per_worker: 1}
)"));
  CHECK(low.model.vocab_size == 256);
  CHECK(low.model.hidden == 1);
  CHECK(low.optimizer.beta1 == 0.0);
  CHECK(low.optimizer.lr == 1e-12);
  CHECK(low.runtime.comm_timeout_s == 0.001);
}

TEST_CASE("enum values parse and print with the same spelling", "[config][enum]") {
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::GPipe, ScheduleKind::Interleaved1F1B,
                            ScheduleKind::ZBH1, ScheduleKind::ZBV, ScheduleKind::ZBAuto}) {
    CHECK(parse_ok(with_data("pipeline: {schedule: " + to_string(kind) + "}\n")).pipeline.schedule == kind);
  }
  CHECK(to_string(ScheduleKind::Interleaved1F1B) == "interleaved-1f1b");
  CHECK(to_string(ScheduleKind::ZBH1) == "zb-h1");
  CHECK(to_string(ScheduleKind::ZBV) == "zbv");
  CHECK(to_string(ScheduleKind::ZBAuto) == "zb-auto");
  CHECK(to_string(ScheduleKind::Custom) == "custom");
  for (Device device : {Device::Cpu, Device::Cuda}) {
    CHECK(parse_ok(with_data("runtime: {device: " + to_string(device) + "}\n")).runtime.device == device);
  }
  for (Backend backend : {Backend::Auto, Backend::Gloo}) {
    CHECK(parse_ok(with_data("runtime: {backend: " + to_string(backend) + "}\n")).runtime.backend == backend);
  }
  CHECK(to_string(ScheduleKind::OneFOneB) == "1f1b");
  CHECK(to_string(ScheduleKind::GPipe) == "gpipe");
  CHECK(to_string(Device::Cpu) == "cpu");
  CHECK(to_string(Device::Cuda) == "cuda");
  CHECK(to_string(Backend::Auto) == "auto");
  CHECK(to_string(Backend::Gloo) == "gloo");
  CHECK(to_string(Backend::Nccl) == "nccl");
}

// ------------------------------------------------------------------------------------------------------------
// Unknown and duplicate keys.

TEST_CASE("an unknown key in a section gets a did-you-mean", "[config][keys]") {
  const auto problems = problems_of(with_data("model:\n  layers: 4\n  hiden: 128\n"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "job.yaml:3: model.hiden: unknown key (fix: did you mean 'hidden'?)");
}

TEST_CASE("an unknown key with nothing close lists the valid keys", "[config][keys]") {
  const Message m = only_problem(with_data("model:\n  colour: red\n"));
  check(m, 2, "model.colour", std::nullopt, "unknown key");
  CHECK(m.hint ==
        "valid keys are vocab_size, layers, hidden, heads, seq_len, dropout, tie_embeddings, arch, activation, "
        "norm_eps, rope_theta, ffn_hidden, kv_heads, head_dim, sliding_window, rope_scaling, init_from");
}

TEST_CASE("unknown keys are caught in every section", "[config][keys]") {
  const std::string section = GENERATE("model", "pipeline", "data", "optimizer", "train", "runtime");
  // The data section needs its path; the others get it from with_data.
  const Message m = only_problem(section == "data" ? "data:\n  zzz_unknown: 1\n  path: corpus.txt\n"
                                                   : with_data(section + ":\n  zzz_unknown: 1\n"));
  check(m, 2, section + ".zzz_unknown", std::nullopt, "unknown key");
  CHECK_THAT(m.hint, StartsWith("valid keys are "));
}

TEST_CASE("an unknown top-level section gets a did-you-mean or the list of sections", "[config][keys]") {
  const Message close = only_problem(with_data("modle:\n  layers: 2\n"));
  check(close, 1, "modle", std::nullopt, "unknown key");
  CHECK(close.hint == "did you mean 'model'?");

  const Message far = only_problem(with_data("scheduler: {x: 1}\n"));
  check(far, 1, "scheduler", std::nullopt, "unknown key");
  CHECK(far.hint == "valid sections are model, pipeline, data, optimizer, train, eval, checkpoint, runtime, observe");
}

TEST_CASE("a key of another section says where it belongs", "[config][keys]") {
  const Message in_section = only_problem(with_data("pipeline:\n  stages: 2\n  layers: 8\n"));
  check(in_section, 3, "pipeline.layers", std::nullopt, "unknown key");
  CHECK(in_section.hint == "move it under 'model:' (model.layers)");

  const Message at_top = only_problem(with_data("steps: 10\n"));
  check(at_top, 1, "steps", std::nullopt, "unknown key");
  CHECK(at_top.hint == "move it under 'train:' (train.steps)");
}

TEST_CASE("a duplicate key names the first occurrence", "[config][keys]") {
  const Message key = only_problem(with_data("model:\n  layers: 2\n  layers: 3\n"));
  check(key, 3, "model.layers", std::nullopt, "duplicate key");
  CHECK(key.hint == "keep one of them; the first is on line 2");

  const Message section = only_problem(with_data("train: {steps: 1}\ntrain: {steps: 2}\n"));
  check(section, 2, "train", std::nullopt, "duplicate key");
}

// ------------------------------------------------------------------------------------------------------------
// Types.

TEST_CASE("integer fields reject non-integers", "[config][types]") {
  const std::string path = GENERATE("model.vocab_size", "model.layers", "model.hidden", "model.heads",
                                    "model.seq_len", "pipeline.stages", "pipeline.microbatches",
                                    "pipeline.micro_batch_size", "pipeline.virtual_stages",
                                    "pipeline.microbatch_group_size", "train.steps", "train.seed", "train.log_interval",
                                    "runtime.master_port", "runtime.threads_per_worker");
  struct Case {
    std::string yaml;      // as written after the key
    std::string shown;     // as the message shows it
    std::string hint_has;  // part of the hint
  };
  const Case bad = GENERATE(Case{"four", "\"four\"", "write a whole number such as"},
                            Case{"2.5", "2.5", "use a whole number such as 2 or 3"},
                            Case{"1e3", "1e3", "write it in digits: 1000"},
                            Case{"\"5\"", "\"5\"", "remove the quotes"},
                            Case{"[1, 2]", "[1, 2]", "not a list"},
                            Case{"{}", "{}", "not a mapping"},
                            Case{"", "null", "not an empty value"},
                            Case{"true", "true", "write a whole number such as"},
                            Case{"0x10", "\"0x10\"", "write a whole number such as"});
  const Message m = only_problem(with_data(one_key(path, bad.yaml)));
  check(m, 2, path, bad.shown, "must be an integer");
  CHECK_THAT(m.hint, ContainsSubstring(bad.hint_has));
}

TEST_CASE("a mapping where a number belongs is shown in flow style", "[config][types]") {
  const auto problems = problems_of(with_data("pipeline:\n  stages:\n    n: 2\n"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "job.yaml:2: pipeline.stages: value {n: 2}: must be an integer "
                       "(fix: write one whole number such as 1, not a mapping)");
}

TEST_CASE("the microbatches example: a word where an integer belongs", "[config][types]") {
  const auto problems = problems_of(with_data("model:\n  layers: 4\npipeline:\n  microbatches: four\n"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "job.yaml:4: pipeline.microbatches: value \"four\": must be an integer "
                       "(fix: write a whole number such as 1)");
}

TEST_CASE("real-number fields reject non-numbers and non-finite values", "[config][types]") {
  const std::string path = GENERATE("model.dropout", "optimizer.lr", "optimizer.eps", "optimizer.weight_decay",
                                    "runtime.comm_timeout_s");
  struct Case {
    std::string yaml;
    std::string shown;
    std::string rule;
  };
  const Case bad = GENERATE(Case{"small", "\"small\"", "must be a number"},
                            Case{"\"0.5\"", "\"0.5\"", "must be a number"},
                            Case{"[0.5]", "[0.5]", "must be a number"},
                            Case{"", "null", "must be a number"},
                            Case{".nan", ".nan", "must be a finite number"},
                            Case{".inf", ".inf", "must be a finite number"});
  const Message m = only_problem(with_data(one_key(path, bad.yaml)));
  check(m, 2, path, bad.shown, bad.rule);
}

TEST_CASE("betas must be a list of two numbers", "[config][types]") {
  const std::string value = GENERATE("0.9", "[0.9]", "[0.9, 0.95, 0.99]", "[]");
  const Message m = only_problem(with_data("optimizer:\n  betas: " + value + "\n"));
  CHECK(m.line == 2);
  CHECK(m.path == "optimizer.betas");
  CHECK(m.rule == "must be a list of two numbers [beta1, beta2]");
  CHECK(m.hint == "write betas: [0.9, 0.95]");

  const Message element = only_problem(with_data("optimizer:\n  betas:\n    - 0.9\n    - high\n"));
  check(element, 4, "optimizer.betas[1]", "\"high\"", "must be a number");
}

TEST_CASE("master_addr must be a non-empty string", "[config][types]") {
  const std::string value = GENERATE("\"\"", "[a, b]");
  const Message m = only_problem(with_data("runtime:\n  master_addr: " + value + "\n"));
  CHECK(m.line == 2);
  CHECK(m.path == "runtime.master_addr");
  CHECK(m.rule == "must be a non-empty host name or address");
}

TEST_CASE("model.tie_embeddings: true by default, true or false only", "[config][types]") {
  CHECK(parse_ok(with_data("model: {layers: 4}\n")).model.tie_embeddings);
  CHECK_FALSE(parse_ok(with_data("model:\n  tie_embeddings: false\n")).model.tie_embeddings);
  const std::string value = GENERATE("yes", "1", "\"true\"", "True", "[true]");
  const Message m = only_problem(with_data("model:\n  tie_embeddings: " + value + "\n"));
  CHECK(m.line == 2);
  CHECK(m.path == "model.tie_embeddings");
  CHECK(m.rule == "must be true or false");
}

TEST_CASE("a section that is not a mapping", "[config][types]") {
  const Message m = only_problem(with_data("model: 5\n"));
  check(m, 1, "model", "5", "must be a mapping of keys");
  CHECK_THAT(m.hint, ContainsSubstring("valid keys are vocab_size"));
}

// ------------------------------------------------------------------------------------------------------------
// Ranges.

TEST_CASE("every bounded field rejects values just outside its range", "[config][range]") {
  struct Case {
    std::string path;
    std::string value;
    std::string rule;
  };
  const Case bad = GENERATE(
      Case{"model.vocab_size", "0", "must be in [1, 1000000]"},
      Case{"model.vocab_size", "1000001", "must be in [1, 1000000]"},
      Case{"model.layers", "0", "must be in [1, 10000]"}, Case{"model.layers", "10001", "must be in [1, 10000]"},
      Case{"model.hidden", "0", "must be in [1, 65536]"}, Case{"model.hidden", "65537", "must be in [1, 65536]"},
      Case{"model.heads", "0", "must be in [1, 65536]"}, Case{"model.heads", "65537", "must be in [1, 65536]"},
      Case{"model.seq_len", "0", "must be in [1, 1000000]"},
      Case{"model.seq_len", "1000001", "must be in [1, 1000000]"},
      Case{"model.dropout", "-0.1", "must be in [0, 1)"}, Case{"model.dropout", "1", "must be in [0, 1)"},
      Case{"pipeline.stages", "0", "must be in [1, 1024]"}, Case{"pipeline.stages", "1025", "must be in [1, 1024]"},
      Case{"pipeline.microbatches", "0", "must be in [1, 1000000]"},
      Case{"pipeline.microbatches", "1000001", "must be in [1, 1000000]"},
      Case{"pipeline.micro_batch_size", "-3", "must be in [1, 1000000]"},
      Case{"pipeline.micro_batch_size", "1000001", "must be in [1, 1000000]"},
      Case{"pipeline.virtual_stages", "0", "must be in [1, 64]"},
      Case{"pipeline.virtual_stages", "65", "must be in [1, 64]"},
      Case{"pipeline.microbatch_group_size", "-1", "must be in [0, 1000000]"},
      Case{"pipeline.microbatch_group_size", "1000001", "must be in [0, 1000000]"},
      Case{"optimizer.lr", "0", "must be in (0, 10]"}, Case{"optimizer.lr", "10.5", "must be in (0, 10]"},
      Case{"optimizer.eps", "0", "must be in (0, 1]"}, Case{"optimizer.eps", "1.5", "must be in (0, 1]"},
      Case{"optimizer.weight_decay", "-1", "must be in [0, 10]"},
      Case{"optimizer.weight_decay", "1e999", "must be in [0, 10]"},
      Case{"train.steps", "0", "must be in [1, 1000000000]"},
      Case{"train.steps", "1000000001", "must be in [1, 1000000000]"},
      Case{"train.seed", "-1", "must be in [0, 9223372036854775807]"},
      Case{"train.seed", "9223372036854775808", "must be in [0, 9223372036854775807]"},
      Case{"train.log_interval", "0", "must be in [1, 1000000000]"},
      Case{"train.log_interval", "1000000001", "must be in [1, 1000000000]"},
      Case{"runtime.master_port", "-1", "must be in [0, 65535]"},
      Case{"runtime.master_port", "65536", "must be in [0, 65535]"},
      Case{"runtime.comm_timeout_s", "0", "must be in (0, 86400]"},
      Case{"runtime.comm_timeout_s", "86400.5", "must be in (0, 86400]"},
      Case{"runtime.threads_per_worker", "0", "must be in [1, 1024]"},
      Case{"runtime.threads_per_worker", "1025", "must be in [1, 1024]"});
  const Message m = only_problem(with_data(one_key(bad.path, bad.value)));
  check(m, 2, bad.path, bad.value, bad.rule);
  CHECK_THAT(m.hint, StartsWith("use a value in "));
}

TEST_CASE("betas elements must be at least 0 and below 1", "[config][range]") {
  const Message m = only_problem(with_data("optimizer:\n  betas: [0.9, 1.0]\n"));
  check(m, 2, "optimizer.betas[1]", "1.0", "must be in [0, 1)");
  CHECK(m.hint == "use a value in [0, 1) such as 0.95");
}

TEST_CASE("vocab_size below 256 is rejected for text because the data are bytes, allowed for tokens", "[config][range]") {
  const Message m = only_problem(with_data("model:\n  vocab_size: 100\n"));
  check(m, 2, "model.vocab_size", "100", "must be at least 256 with data.format text (the data are bytes, ids 0..255)");
  CHECK(m.hint == "use vocab_size: 256 or more, or train on tokenized data (data.format tokens or megatron)");
  const JobSpec tokens = parse_ok("model: {vocab_size: 100}\ndata: {format: tokens, dtype: uint32, path: train.bin}\n");
  CHECK(tokens.model.vocab_size == 100);
  REQUIRE(tokens.data.sources.size() == 1);
  CHECK(tokens.data.sources[0].format == ppctl::config::DataFormat::Tokens);
  CHECK(tokens.data.sources[0].dtype == ppctl::config::TokenDType::Uint32);
  CHECK(tokens.data.sources[0].files == std::vector<std::string>{corpus_dir().str() + "/train.bin"});
  CHECK(tokens.data.files.empty());
}

TEST_CASE("data.blend: weights normalised, format and dtype per entry or from data.*", "[config][data]") {
  const JobSpec spec = parse_ok(
      "model: {vocab_size: 300}\ndata:\n  format: megatron\n  blend:\n    - {weight: 3, path: a/train}\n"
      "    - {weight: 1, path: corpus.txt, format: text}\n");
  REQUIRE(spec.data.sources.size() == 2);
  CHECK(spec.data.sources[0].weight == 0.75);
  CHECK(spec.data.sources[0].format == ppctl::config::DataFormat::Megatron);
  CHECK(spec.data.sources[0].files == std::vector<std::string>{corpus_dir().str() + "/a/train"});
  CHECK(spec.data.sources[1].weight == 0.25);
  CHECK(spec.data.sources[1].format == ppctl::config::DataFormat::Text);
  CHECK(spec.data.sources[1].files == std::vector<std::string>{corpus_dir().str() + "/corpus.txt"});
  // A text entry in the blend keeps the byte rule for vocab_size.
  CHECK(only_problem("model: {vocab_size: 100}\ndata: {blend: [{weight: 1, path: corpus.txt, format: text}]}\n").path ==
        "model.vocab_size");
}

TEST_CASE("data.blend and data.format mistakes are reported with the entry", "[config][data]") {
  const Message both = only_problem("data: {path: corpus.txt, blend: [{weight: 1, path: corpus.txt}]}\n");
  check(both, 1, "data.blend", std::nullopt, "data.path and data.blend exclude each other");
  const Message weight = only_problem("data: {format: tokens, blend: [{weight: 0, path: x.bin}]}\n");
  check(weight, 1, "data.blend[0].weight", "0", "must be in (0, 1000000000]");
  const Message missing = only_problem("data: {format: tokens, blend: [{path: x.bin}]}\n");
  check(missing, 1, "data.blend[0].weight", std::nullopt, "required key is missing");
  const Message unknown = only_problem("data: {format: tokens, blend: [{weight: 1, path: x.bin, wieght: 2}]}\n");
  CHECK(unknown.path == "data.blend[0].wieght");
  const Message format = only_problem("data: {format: indexed, path: corpus.txt}\n");
  check(format, 1, "data.format", "\"indexed\"", "must be one of text, tokens, megatron");
  CHECK(format.hint == "did you mean 'megatron'?");
  const Message dtype = only_problem("data: {format: tokens, dtype: int16, path: x.bin}\n");
  check(dtype, 1, "data.dtype", "\"int16\"", "must be one of uint16, uint32, int32");
  const Message empty = only_problem("data: {blend: []}\n");
  check(empty, 1, "data.blend", "[]", "must be a non-empty list of {weight, path} entries");
}

// ------------------------------------------------------------------------------------------------------------
// Enums.

/// The rule for a schedule outside the allowed set.
const std::string kSchedules = "must be one of 1f1b, gpipe, interleaved-1f1b, zb-h1, zbv, zb-auto, custom";

TEST_CASE("enum values outside the allowed set list the allowed values", "[config][enum]") {
  struct Case {
    std::string path;
    std::string yaml;
    std::string shown;
    std::string rule;
    std::string hint;
  };
  const Case bad = GENERATE(
      Case{"pipeline.schedule", "pipedream", "\"pipedream\"", kSchedules, "write one of the listed values"},
      Case{"pipeline.schedule", "GPipe", "\"GPipe\"", kSchedules, "did you mean 'gpipe'?"},
      Case{"pipeline.schedule", "[gpipe]", "[gpipe]", kSchedules, "write one of the listed values"},
      Case{"pipeline.schedule", "interleaved", "\"interleaved\"", kSchedules, "did you mean 'interleaved-1f1b'?"},
      Case{"pipeline.schedule", "ZB1P", "\"ZB1P\"", kSchedules, "did you mean 'zb-h1'?"},
      Case{"pipeline.schedule", "zb-v", "\"zb-v\"", kSchedules, "did you mean 'zbv'?"},
      Case{"pipeline.schedule", "zb_auto", "\"zb_auto\"", kSchedules, "did you mean 'zb-auto'?"},
      Case{"runtime.device", "tpu", "\"tpu\"", "must be one of cpu, cuda", "did you mean 'cpu'?"},
      Case{"runtime.device", "gpu", "\"gpu\"", "must be one of cpu, cuda", "did you mean 'cuda'?"},
      Case{"runtime.backend", "mpi", "\"mpi\"", "must be one of auto, gloo, nccl", "write one of the listed values"},
      Case{"runtime.backend", "NCCL", "\"NCCL\"", "must be one of auto, gloo, nccl", "did you mean 'nccl'?"});
  const Message m = only_problem(with_data(one_key(bad.path, bad.yaml)));
  check(m, 2, bad.path, bad.shown, bad.rule);
  CHECK(m.hint == bad.hint);
}

// ------------------------------------------------------------------------------------------------------------
// Combinations.

TEST_CASE("more stages than layers points at pipeline.stages", "[config][combination]") {
  const Message m = only_problem(with_data("model:\n  layers: 2\npipeline:\n  stages: 4\n"));
  check(m, 4, "pipeline.stages", "4", "must not exceed model.layers (2)");
  CHECK(m.hint == "use at most 2 stages, or raise model.layers to 4 or more");

  const Message defaulted = only_problem(with_data("pipeline:\n  stages: 8\n"));
  check(defaulted, 2, "pipeline.stages", "8", "must not exceed model.layers (4)");

  CHECK(parse_ok(with_data("model: {layers: 4}\npipeline: {stages: 4}\n")).pipeline.stages == 4);
}

TEST_CASE("heads must divide hidden", "[config][combination]") {
  const auto problems = problems_of(with_data(R"(# line 1
model:
  vocab_size: 256
  layers: 4
  hidden: 128
  seq_len: 32
  heads: 5
)"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] ==
        "job.yaml:7: model.heads: value 5: must divide model.hidden (128) (fix: use a divisor of 128 such as 4 or 8)");

  const Message more_heads_than_width = only_problem(with_data("model: {hidden: 128, heads: 256}\n"));
  check(more_heads_than_width, 1, "model.heads", "256", "must divide model.hidden (128)");
  CHECK(more_heads_than_width.hint == "use a divisor of 128 such as 128");
}

TEST_CASE("a defaulted heads that does not divide hidden points at hidden's line", "[config][combination]") {
  const Message m = only_problem(with_data("model:\n  layers: 2\n  hidden: 130\n"));
  check(m, 3, "model.heads", "4 (default)", "must divide model.hidden (130)");
  CHECK(m.hint == "use a divisor of 130 such as 2 or 5");
}

TEST_CASE("backend nccl needs device cuda", "[config][combination]") {
  const Message m = only_problem(with_data("runtime:\n  device: cpu\n  backend: nccl\n"));
  check(m, 3, "runtime.backend", "\"nccl\"", "needs runtime.device cuda (runtime.device is cpu)");
  CHECK(m.hint == "use backend gloo or auto on cpu, or set runtime.device: cuda");

  const Message defaulted = only_problem(with_data("runtime:\n  backend: nccl\n"));
  check(defaulted, 2, "runtime.backend", "\"nccl\"", "needs runtime.device cuda (runtime.device is cpu, the default)");

  CHECK(parse_ok(with_data("runtime: {device: cuda, backend: nccl}\n")).runtime.backend == Backend::Nccl);
  CHECK(parse_ok(with_data("runtime: {device: cpu, backend: gloo}\n")).runtime.backend == Backend::Gloo);
}

TEST_CASE("p2p_dtype: auto follows precision; bf16 needs precision bf16", "[config][combination]") {
  const auto resolved = [](const std::string& runtime) {
    return p2p_dtype_of(parse_ok(with_data("runtime: {" + runtime + "}\n")).runtime);
  };
  CHECK(resolved("") == P2pDtype::Fp32);
  CHECK(resolved("precision: bf16") == P2pDtype::Bf16);
  CHECK(resolved("precision: bf16, p2p_dtype: auto") == P2pDtype::Bf16);
  CHECK(resolved("precision: bf16, p2p_dtype: fp32") == P2pDtype::Fp32);
  CHECK(resolved("precision: bf16, p2p_dtype: bf16") == P2pDtype::Bf16);
  CHECK(resolved("precision: fp32, p2p_dtype: fp32") == P2pDtype::Fp32);
  CHECK(p2p_element_bytes(parse_ok(with_data("runtime: {precision: bf16}\n")).runtime) == 2);
  CHECK(p2p_element_bytes(parse_ok(with_data("runtime: {precision: fp32}\n")).runtime) == 4);

  const Message m = only_problem(with_data("runtime:\n  precision: fp32\n  p2p_dtype: bf16\n"));
  check(m, 3, "runtime.p2p_dtype", "\"bf16\"", "needs runtime.precision bf16 or bf16-params (runtime.precision is fp32)");
  CHECK(m.hint == "set runtime.precision: bf16, or p2p_dtype auto or fp32");
  const Message defaulted = only_problem(with_data("runtime:\n  p2p_dtype: bf16\n"));
  check(defaulted, 2, "runtime.p2p_dtype", "\"bf16\"",
        "needs runtime.precision bf16 or bf16-params (runtime.precision is fp32, the default)");
  const Message unknown = only_problem(with_data("runtime:\n  p2p_dtype: int8\n"));
  CHECK(unknown.path == "runtime.p2p_dtype");
}

TEST_CASE("a combination is not checked when one of its keys is already wrong", "[config][combination]") {
  check(only_problem(with_data("model: {layers: x}\npipeline: {stages: 8}\n")), 1, "model.layers", "\"x\"",
        "must be an integer");
  check(only_problem(with_data("model: {hidden: 0, heads: 3}\n")), 1, "model.hidden", "0", "must be in [1, 65536]");
  check(only_problem(with_data("model: 7\npipeline: {stages: 8}\n")), 1, "model", "7", "must be a mapping of keys");
  check(only_problem(with_data("runtime: {device: gpu, backend: nccl}\n")), 1, "runtime.device", "\"gpu\"",
        "must be one of cpu, cuda");
}

// ------------------------------------------------------------------------------------------------------------
// Schedules: virtual stages, microbatch groups, custom schedule files.

TEST_CASE("virtual_stages defaults to 2 for zbv and interleaved-1f1b, 1 otherwise", "[config][schedule]") {
  CHECK(parse_ok(with_data("pipeline: {schedule: zbv}\n")).pipeline.virtual_stages == 2);
  CHECK(parse_ok(with_data("pipeline: {schedule: interleaved-1f1b}\n")).pipeline.virtual_stages == 2);
  CHECK(parse_ok(with_data("pipeline: {schedule: zb-h1}\n")).pipeline.virtual_stages == 1);
  CHECK(parse_ok(with_data("pipeline: {schedule: gpipe}\n")).pipeline.virtual_stages == 1);
  const JobSpec four = parse_ok(
      with_data("model: {layers: 8}\npipeline: {stages: 2, schedule: interleaved-1f1b, virtual_stages: 4, "
                "microbatches: 8, microbatch_group_size: 4}\n"));
  CHECK(four.pipeline.virtual_stages == 4);
  CHECK(four.pipeline.microbatch_group_size == 4);
  // A broken schedule value leaves virtual_stages alone and adds no second problem.
  check(only_problem(with_data("pipeline:\n  schedule: zvb\n  virtual_stages: 2\n")), 2, "pipeline.schedule",
        "\"zvb\"", kSchedules);
}

TEST_CASE("virtual_stages must suit the schedule", "[config][schedule]") {
  struct Case {
    std::string schedule;
    std::string v;
    std::string rule;
    std::string hint;
  };
  const Case bad = GENERATE(
      Case{"1f1b", "2", "must be 1 with schedule 1f1b (one stage per rank)",
           "leave pipeline.virtual_stages out, or use schedule interleaved-1f1b or zbv for several stages per rank"},
      Case{"gpipe", "3", "must be 1 with schedule gpipe (one stage per rank)", ""},
      Case{"zb-h1", "2", "must be 1 with schedule zb-h1 (one stage per rank)", ""},
      Case{"zb-auto", "2", "must be 1 with schedule zb-auto (one stage per rank)", ""},
      Case{"zbv", "1", "must be 2 with schedule zbv (two stages per rank, in a V)",
           "set pipeline.virtual_stages: 2, or leave it out (2 is zbv's default)"},
      Case{"zbv", "4", "must be 2 with schedule zbv (two stages per rank, in a V)", ""},
      Case{"interleaved-1f1b", "1", "must be at least 2 with schedule interleaved-1f1b",
           "set pipeline.virtual_stages: 2 or more (2 is the default), or use schedule 1f1b"});
  const Message m =
      only_problem(with_data("model:\n  layers: 16\npipeline:\n  schedule: " + bad.schedule +
                             "\n  virtual_stages: " + bad.v + "\n"));
  check(m, 5, "pipeline.virtual_stages", bad.v, bad.rule);
  if (!bad.hint.empty()) CHECK(m.hint == bad.hint);
}

TEST_CASE("a virtual_stages that does not suit the schedule is not also checked against layers",
          "[config][schedule]") {
  const Message m = only_problem(with_data("model: {layers: 4}\npipeline: {stages: 4, schedule: 1f1b, virtual_stages: 2}\n"));
  check(m, 2, "pipeline.virtual_stages", "2", "must be 1 with schedule 1f1b (one stage per rank)");
}

TEST_CASE("layers must cover stages x virtual_stages", "[config][schedule][combination]") {
  const Message m = only_problem(
      with_data("model:\n  layers: 6\npipeline:\n  stages: 4\n  schedule: interleaved-1f1b\n  virtual_stages: 2\n"));
  check(m, 6, "pipeline.virtual_stages", "2",
        "pipeline.stages x pipeline.virtual_stages = 4 x 2 = 8 stages must not exceed model.layers (6)");
  CHECK(m.hint == "raise model.layers to 8 or more, or lower pipeline.stages to 3");

  // zbv's default of 2: reported at pipeline.stages' line, the value marked as the default.
  const Message defaulted =
      only_problem(with_data("model:\n  layers: 4\npipeline:\n  stages: 4\n  schedule: zbv\n"));
  check(defaulted, 4, "pipeline.virtual_stages", "2 (default)",
        "pipeline.stages x pipeline.virtual_stages = 4 x 2 = 8 stages must not exceed model.layers (4)");

  // Interleaved with room for fewer chunks: the hint offers that too.
  const Message chunks = only_problem(with_data(
      "model: {layers: 12}\npipeline: {stages: 4, schedule: interleaved-1f1b, virtual_stages: 4}\n"));
  CHECK(chunks.hint ==
        "raise model.layers to 16 or more, or lower pipeline.stages to 3, or lower pipeline.virtual_stages to 3");

  // One stage per rank keeps the original message.
  check(only_problem(with_data("model: {layers: 2}\npipeline: {stages: 3}\n")), 2, "pipeline.stages", "3",
        "must not exceed model.layers (2)");
  CHECK(parse_ok(with_data("model: {layers: 8}\npipeline: {stages: 4, schedule: zbv}\n")).pipeline.stages == 4);
}

TEST_CASE("microbatch_group_size applies only to interleaved-1f1b", "[config][schedule]") {
  const Message m =
      only_problem(with_data("pipeline:\n  schedule: 1f1b\n  microbatch_group_size: 4\n"));
  check(m, 3, "pipeline.microbatch_group_size", "4",
        "only applies to schedule interleaved-1f1b (pipeline.schedule is 1f1b)");
  CHECK(m.hint == "leave pipeline.microbatch_group_size out, or set pipeline.schedule: interleaved-1f1b");
  // Defaulted schedule (1f1b): reported at the key's own line.
  check(only_problem(with_data("pipeline:\n  microbatch_group_size: 2\n")), 2, "pipeline.microbatch_group_size", "2",
        "only applies to schedule interleaved-1f1b (pipeline.schedule is 1f1b)");
  CHECK(parse_ok(with_data("pipeline: {schedule: zbv, microbatch_group_size: 0}\n")).pipeline.microbatch_group_size ==
        0);
}

TEST_CASE("a custom schedule needs schedule_file, resolved to an absolute readable file", "[config][schedule]") {
  const TempDir dir;
  dir.write("corpus.txt");
  const fs::path csv = dir.write("schedules/mine.csv", "0F0,0B0\n");
  const JobSpec spec = parse_ok(
      with_data("pipeline:\n  schedule: custom\n  schedule_file: schedules/../schedules/mine.csv\n"), dir.str());
  CHECK(spec.pipeline.schedule == ScheduleKind::Custom);
  CHECK(spec.pipeline.schedule_file == csv.string());
  CHECK(spec.pipeline.virtual_stages == 1);
  CHECK(parse_ok(with_data("pipeline: {schedule: custom, virtual_stages: 3, schedule_file: " + csv.string() + "}\n"),
                 dir.str())
            .pipeline.schedule_file == csv.string());

  const Message missing = only_problem(with_data("pipeline:\n  stages: 1\n  schedule: custom\n"), dir.str());
  check(missing, 3, "pipeline.schedule_file", std::nullopt,
        "required key is missing: schedule custom reads its actions from a CSV file");
  CHECK_THAT(missing.hint, ContainsSubstring("configs/README.md"));

  const Message absent =
      only_problem(with_data("pipeline:\n  schedule: custom\n  schedule_file: nope.csv\n"), dir.str());
  check(absent, 3, "pipeline.schedule_file", "\"nope.csv\"",
        "names no readable file (" + (dir.path() / "nope.csv").string() + ": No such file or directory)");
  CHECK(absent.hint == "check the path; a relative path is resolved against " + dir.str());

  const Message folder =
      only_problem(with_data("pipeline:\n  schedule: custom\n  schedule_file: schedules\n"), dir.str());
  check(folder, 3, "pipeline.schedule_file", "\"schedules\"", "names a folder, not a regular file");

  const Message empty = only_problem(with_data("pipeline:\n  schedule: custom\n  schedule_file: \"\"\n"), dir.str());
  check(empty, 3, "pipeline.schedule_file", "\"\"", "must be a non-empty path");

  const Message other = only_problem(with_data("pipeline:\n  schedule: zb-h1\n  schedule_file: schedules/mine.csv\n"),
                                     dir.str());
  check(other, 3, "pipeline.schedule_file", "\"schedules/mine.csv\"",
        "is only read with schedule custom (pipeline.schedule is zb-h1)");
  CHECK(other.hint == "leave pipeline.schedule_file out, or set pipeline.schedule: custom");
}

TEST_CASE("pipeline.zb_auto: zb-auto's costs, one number for every stage or one per stage", "[config][schedule]") {
  const JobSpec given = parse_ok(with_data(
      "model: {layers: 4}\npipeline:\n  stages: 4\n  schedule: zb-auto\n  zb_auto: {f: 1.5, i: [0.1, 1, 1, 1], w: 2, "
      "defer_penalty: 0.4, p2p_latency: 0.05, max_in_flight: 6}\n"));
  const ZbAutoSpec& z = given.pipeline.zb_auto;
  CHECK(z.forward == std::vector<double>{1.5});
  CHECK(z.input_grad == std::vector<double>{0.1, 1, 1, 1});
  CHECK(z.weight_grad == std::vector<double>{2});
  CHECK(z.defer_penalty == std::vector<double>{0.4});
  CHECK(z.p2p_latency == 0.05);
  CHECK(z.max_in_flight == 6);
  // Not written: plan's defaults (F = I = W = 1 ms, nothing for deferring or sending), limit 0 = stages.
  const ZbAutoSpec defaults = parse_ok(with_data("pipeline: {schedule: zb-auto}\n")).pipeline.zb_auto;
  CHECK(defaults.forward == std::vector<double>{1.0});
  CHECK(defaults.input_grad == std::vector<double>{1.0});
  CHECK(defaults.weight_grad == std::vector<double>{1.0});
  CHECK(defaults.defer_penalty == std::vector<double>{0.0});
  CHECK(defaults.p2p_latency == 0.0);
  CHECK(defaults.max_in_flight == 0);
}

TEST_CASE("pipeline.zb_auto: each problem names the key, the value, the rule and the fix", "[config][schedule]") {
  const std::string zb = "model: {layers: 4}\npipeline:\n  stages: 2\n  schedule: zb-auto\n  zb_auto: ";
  const Message length = only_problem(with_data(zb + "{i: [1, 2, 3]}\n"));
  check(length, 5, "pipeline.zb_auto.i", "[1, 2, 3]", "has 3 entries but pipeline.stages is 2");
  CHECK(length.hint == "give one number for every stage, or 2 (one per stage, in stage order)");

  const Message unknown = only_problem(with_data(zb + "{f: 1, wg: 2}\n"));
  check(unknown, 5, "pipeline.zb_auto.wg", std::nullopt,
        "unknown key: zb-auto takes f, i, w, defer_penalty, p2p_latency, max_in_flight");
  CHECK(unknown.hint == "did you mean 'w'?");

  check(only_problem(with_data(zb + "{w: -1}\n")), 5, "pipeline.zb_auto.w", "-1", "must be in [0, 1000000000]");
  check(only_problem(with_data(zb + "{defer_penalty: [0.1, x]}\n")), 5, "pipeline.zb_auto.defer_penalty[1]",
        "\"x\"", "must be a number");
  check(only_problem(with_data(zb + "{max_in_flight: 1.5}\n")), 5, "pipeline.zb_auto.max_in_flight", "1.5",
        "must be an integer");
  check(only_problem(with_data(zb + "{f: []}\n")), 5, "pipeline.zb_auto.f", "[]",
        "must be a number (every stage) or a non-empty list of numbers (one per stage), in ms");
  const Message scalar = only_problem(with_data(zb + "3\n"));
  check(scalar, 5, "pipeline.zb_auto", "3", "must be a mapping of zb-auto's costs in ms");

  // The value is a mapping (its ": " would confuse split()): the whole line.
  const auto other = problems_of(with_data("pipeline:\n  schedule: zb-h1\n  zb_auto: {w: 2}\n"));
  REQUIRE(other.size() == 1);
  CHECK(other[0] ==
        "job.yaml:3: pipeline.zb_auto: value {f: 1, i: 1, w: 2, defer_penalty: 0, p2p_latency: 0, max_in_flight: 0}: "
        "only applies to schedule zb-auto (pipeline.schedule is zb-h1) (fix: leave pipeline.zb_auto out, or set "
        "pipeline.schedule: zb-auto)");
}

TEST_CASE("an unreadable schedule_file is named", "[config][schedule]") {
  if (::geteuid() == 0) SKIP("root reads any file");
  const TempDir dir;
  const fs::path csv = dir.write("locked.csv", "0F0,0B0\n");
  fs::permissions(csv, fs::perms::none);
  const Message locked = only_problem(
      with_data("pipeline:\n  schedule: custom\n  schedule_file: " + csv.string() + "\n"), corpus_dir().str());
  check(locked, 3, "pipeline.schedule_file", "\"" + csv.string() + "\"",
        "cannot be read (" + csv.string() + ": Permission denied)");
  CHECK(locked.hint == "check the file's permissions");
}

// ------------------------------------------------------------------------------------------------------------
// Data paths.

TEST_CASE("data.path is required", "[config][data]") {
  const Message no_section = only_problem("# comment\nmodel:\n  layers: 2\n");
  check(no_section, 2, "data.path", std::nullopt, "required key is missing");
  CHECK(no_section.hint == "name the training text, e.g. data: {path: corpus/*.txt}");

  const auto problems = problems_of("model: {layers: 2}\ndata:\n  paths: corpus.txt\n");
  REQUIRE(problems.size() == 2);
  check(split(problems[0]), 2, "data.path", std::nullopt, "required key is missing");
  check(split(problems[1]), 3, "data.paths", std::nullopt, "unknown key");
  CHECK(split(problems[1]).hint == "did you mean 'path'?");
}

TEST_CASE("data.path must be a path or a non-empty list of paths", "[config][data]") {
  const std::string value = GENERATE("[]", "", "{}");
  const Message m = only_problem("data:\n  path: " + value + "\n");
  CHECK(m.line == 2);
  CHECK(m.path == "data.path");
  CHECK(m.rule == "must be a path or glob, or a list of them");

  const Message element = only_problem("data:\n  path:\n    - corpus.txt\n    - [x]\n");
  check(element, 4, "data.path[1]", "[x]", "must be a non-empty path or glob");
}

TEST_CASE("a data entry that matches nothing is named", "[config][data]") {
  const TempDir dir;
  dir.write("a.txt");
  const auto problems = problems_of("data:\n  path:\n    - a.txt\n    - missing/*.txt\n    - nope.txt\n", dir.str());
  REQUIRE(problems.size() == 2);
  const Message first = split(problems[0]);
  check(first, 4, "data.path[1]", "\"missing/*.txt\"", "matches no regular file");
  CHECK(first.hint == "check the path; relative paths are resolved against " + dir.str());
  check(split(problems[1]), 5, "data.path[2]", "\"nope.txt\"", "matches no regular file");

  check(only_problem("data: {path: '*.csv'}\n", dir.str()), 1, "data.path", "\"*.csv\"", "matches no regular file");

  const std::string absolute = (dir.path() / "absent" / "*.txt").string();
  const Message absolute_entry = only_problem("data: {path: '" + absolute + "'}\n", dir.str());
  check(absolute_entry, 1, "data.path", "\"" + absolute + "\"", "matches no regular file");
  CHECK(absolute_entry.hint == "check the path");
}

TEST_CASE("the data must hold at least one sequence of seq_len + 1 bytes", "[config][data]") {
  const TempDir dir;
  dir.write("a.txt", "12345");
  dir.write("b.txt", "678");
  const Message short_text = only_problem("model: {seq_len: 8}\ndata: {path: '*.txt'}\n", dir.str());
  check(short_text, 2, "data.path", "2 file(s), 8 bytes", "must hold at least model.seq_len + 1 = 9 bytes of text");
  CHECK(short_text.hint == "add text, or lower model.seq_len to 7 or less");
  // Exactly seq_len + 1 bytes over both files is enough.
  CHECK_NOTHROW(parse_job_spec("model: {seq_len: 7}\ndata: {path: '*.txt'}\n", "job.yaml", dir.str()));
  // Empty files: the rule is still stated, with nothing to lower seq_len to.
  dir.write("c/empty.txt", "");
  check(only_problem("data: {path: c/empty.txt}\n", dir.str()), 1, "data.path", "1 file(s), 0 bytes",
        "must hold at least model.seq_len + 1 = 129 bytes of text");
}

TEST_CASE("data globs skip directories and follow symlinks", "[config][data]") {
  const TempDir dir;
  const fs::path real = dir.write("real.txt");
  fs::create_directories(dir.path() / "folder.txt");
  fs::create_symlink(real, dir.path() / "link.txt");
  fs::create_symlink(dir.path() / "gone", dir.path() / "dangling.txt");
  fs::create_symlink(dir.path() / "folder.txt", dir.path() / "dirlink.txt");

  const JobSpec spec = parse_ok("data: {path: '*.txt'}\n", dir.str());
  CHECK(spec.data.files == std::vector<std::string>{(dir.path() / "link.txt").string(), real.string()});

  const Message only_dirs = only_problem("data: {path: folder.txt}\n", dir.str());
  check(only_dirs, 1, "data.path", "\"folder.txt\"", "matches no regular file");
  CHECK(only_dirs.hint == "it names only folders; name the files in them, e.g. folder.txt/*.txt");

  check(only_problem("data: {path: dangling.txt}\n", dir.str()), 1, "data.path", "\"dangling.txt\"",
        "matches no regular file");
}

TEST_CASE("data files are absolute, sorted and unique", "[config][data]") {
  const TempDir dir;
  const fs::path a = dir.write("a.txt");
  const fs::path b = dir.write("b.txt");
  const fs::path c = dir.write("sub/c.txt");
  const JobSpec spec =
      parse_ok("data:\n  path: [sub/c.txt, '*.txt', ./a.txt, sub/../b.txt, " + a.string() + "]\n", dir.str());
  CHECK(spec.data.files == std::vector<std::string>{a.string(), b.string(), c.string()});
  CHECK(spec.data.paths.size() == 5);
  CHECK(spec.data.paths[1] == "*.txt");
}

TEST_CASE("relative data paths are resolved against base_dir, not the working directory", "[config][data]") {
  const TempDir dir;
  const fs::path file = dir.write("specs/corpus/x.txt");
  const JobSpec spec = parse_ok("data: {path: 'corpus/*.txt'}\n", (dir.path() / "specs").string());
  CHECK(spec.data.files == std::vector<std::string>{file.string()});

  // The same spec from another folder finds nothing: the working directory plays no part.
  check(only_problem("data: {path: 'corpus/*.txt'}\n", dir.str()), 1, "data.path", "\"corpus/*.txt\"",
        "matches no regular file");
}

TEST_CASE("glob characters in base_dir match only themselves", "[config][data]") {
  const TempDir dir;
  const fs::path file = dir.write("run[1]/x.txt");
  dir.write("run1/y.txt");  // what `run[1]` would match as a pattern
  const JobSpec spec = parse_ok("data: {path: '*.txt'}\n", (dir.path() / "run[1]").string());
  CHECK(spec.data.files == std::vector<std::string>{file.string()});
}

// ------------------------------------------------------------------------------------------------------------
// Whole documents.

TEST_CASE("an empty spec is one problem", "[config][document]") {
  const std::string text = GENERATE("", "# only a comment\n\n", "~\n");
  const auto problems = problems_of(text);
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], StartsWith("job.yaml:1: the spec is empty (fix: "));
}

TEST_CASE("a spec that is not a mapping", "[config][document]") {
  const auto list = problems_of("- model\n- data\n");
  REQUIRE(list.size() == 1);
  CHECK_THAT(list[0], StartsWith("job.yaml:1: value [model, data]: the spec must be a mapping of sections "
                                 "(model, pipeline, data, optimizer, train, eval, checkpoint, runtime, observe) (fix: "));
  const auto scalar = problems_of("just words\n");
  REQUIRE(scalar.size() == 1);
  CHECK_THAT(scalar[0], StartsWith("job.yaml:1: value \"just words\": the spec must be a mapping"));
}

TEST_CASE("a YAML syntax error reports yaml-cpp's line", "[config][document]") {
  const auto indent = problems_of("model:\n  layers: 4\n  hidden: 8\n bad: 1\n");
  REQUIRE(indent.size() == 1);
  CHECK(indent[0] == "job.yaml:4: invalid YAML: end of map not found "
                     "(fix: check the indentation, quoting and brackets on line 4 and just above it)");

  // A tab in the indentation is named as such (the next test case).
  const auto tab = problems_of("model:\n  layers: 4\n\tbad: 1\n");
  REQUIRE(tab.size() == 1);
  CHECK_THAT(tab[0], StartsWith("job.yaml:3: line 3 is indented with a tab; YAML allows only spaces (fix: "));
}

TEST_CASE("yaml-cpp's messages reach the terminal escaped, and its depth guard is named", "[config][document]") {
  // An unknown escape in a double-quoted string: yaml-cpp's message quotes the character itself (here ESC).
  const auto escape = problems_of("model:\n  layers: \"\\\x1b[31m\"\n");
  REQUIRE(escape.size() == 1);
  CHECK_THAT(escape[0], StartsWith("job.yaml:2: invalid YAML: unknown escape character: \\x1b (fix: "));
  CHECK(escape[0].find('\x1b') == std::string::npos);
  // Brackets nested past yaml-cpp's limit: it said only "bad file".
  const auto deep = problems_of("train: {seed: " + std::string(3000, '[') + std::string(3000, ']') + "}\n");
  REQUIRE(deep.size() == 1);
  CHECK_THAT(deep[0], StartsWith("job.yaml:1: invalid YAML: nested "));
  CHECK(deep[0].find("levels deep, more than the YAML reader allows") != std::string::npos);
}

TEST_CASE("a ',' where a document starts is invalid YAML, not a hang (fuzz finding)", "[config][document]") {
  // yaml-cpp's LoadAll looped forever on these; each is refused on the line of the ','.
  for (const auto& [text, line] : std::vector<std::pair<std::string, int>>{
           {",", 1}, {"# a comment\n, b: 1\n", 2}, {"---\n,\n", 2}, {"- a\n,\n", 2}, {"  ,", 1}}) {
    INFO(text);
    const auto problems = problems_of(text);
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0], StartsWith(fmt::format("job.yaml:{}: invalid YAML: unexpected ',' where a value or key "
                                                   "should start (fix: ",
                                                   line)));
  }
}

TEST_CASE("an integer field given a huge real gets the plain hint (fuzz finding)", "[config]") {
  // 1.7e69 has no int64 neighbours to suggest; converting it was undefined behaviour.
  for (const char* value : {"1777777777777777777777777777777777777777777777777777777777777777777777.7", "-1e300"}) {
    const auto problems = problems_of(with_data(fmt::format("train: {{seed: {}}}\n", value)));
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0], ContainsSubstring("train.seed"));
    CHECK_THAT(problems[0], ContainsSubstring("write a whole number such as"));
  }
}

TEST_CASE("a file with several YAML documents", "[config][document]") {
  const auto problems = problems_of(with_data("model: {layers: 2}\n") + "---\nmodel: {layers: 3}\n");
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], StartsWith("job.yaml:4: the file holds 2 YAML documents; a spec is one (fix: "));
}

TEST_CASE("every problem is reported at once, in line order", "[config][document]") {
  const auto problems = problems_of(R"(model:
  layers: 2
  hiden: 64
  heads: 3
pipeline:
  stages: 4
  schedule: zigzag
optimizer:
  lr: -1
train:
  steps: 2.5
runtime:
  backend: nccl
extra: 1
)");
  const std::vector<std::string> expected = {
      "job.yaml:1: data.path: required key is missing (fix: name the training text, e.g. data: {path: corpus/*.txt})",
      "job.yaml:3: model.hiden: unknown key (fix: did you mean 'hidden'?)",
      "job.yaml:4: model.heads: value 3: must divide model.hidden (128) (fix: use a divisor of 128 such as 2 or 4)",
      "job.yaml:6: pipeline.stages: value 4: must not exceed model.layers (2) "
      "(fix: use at most 2 stages, or raise model.layers to 4 or more)",
      "job.yaml:7: pipeline.schedule: value \"zigzag\": must be one of 1f1b, gpipe, interleaved-1f1b, zb-h1, zbv, "
      "zb-auto, custom (fix: write one of the listed values)",
      "job.yaml:9: optimizer.lr: value -1: must be in (0, 10] (fix: use a value in (0, 10] such as 0.001)",
      "job.yaml:11: train.steps: value 2.5: must be an integer (fix: use a whole number such as 2 or 3)",
      "job.yaml:13: runtime.backend: value \"nccl\": needs runtime.device cuda (runtime.device is cpu, the default) "
      "(fix: use backend gloo or auto on cpu, or set runtime.device: cuda)",
      "job.yaml:14: extra: unknown key (fix: valid sections are model, pipeline, data, optimizer, train, eval, checkpoint, runtime, observe)",
  };
  CHECK(problems == expected);
}

// ------------------------------------------------------------------------------------------------------------
// Files.

TEST_CASE("load_job_spec reads a file and resolves data against its folder", "[config][file]") {
  const TempDir dir;
  const fs::path text = dir.write("corpus/a.txt");
  const fs::path spec_file = dir.write("specs/job.yaml", "data:\n  path: ../corpus/*.txt\nmodel: {layers: 8}\n");
  const JobSpec spec = load_job_spec(spec_file.string());
  CHECK(spec.source == spec_file.string());
  CHECK(spec.model.layers == 8);
  CHECK(spec.data.files == std::vector<std::string>{text.string()});
}

TEST_CASE("load_job_spec names the file as given in every message", "[config][file]") {
  const TempDir dir;
  dir.write("job.yaml", "model:\n  layrs: 2\n");
  const fs::path cwd = fs::current_path();
  fs::current_path(dir.path());
  std::vector<std::string> problems;
  try {
    load_job_spec("./job.yaml");
  } catch (const ppctl::ConfigError& e) {
    problems = e.problems();
  }
  fs::current_path(cwd);
  REQUIRE(problems.size() == 2);
  CHECK_THAT(problems[0], StartsWith("./job.yaml:1: data.path: required key is missing"));
  CHECK(problems[1] == "./job.yaml:2: model.layrs: unknown key (fix: did you mean 'layers'?)");
}

/// The one problem load_job_spec reports for `path`.
std::string only_load_problem(const std::string& path) {
  try {
    load_job_spec(path);
  } catch (const ppctl::ConfigError& e) {
    REQUIRE(e.problems().size() == 1);
    return e.problems()[0];
  }
  FAIL("expected a ConfigError for " << path);
  return {};
}

TEST_CASE("a spec file that cannot be read is one problem naming the path", "[config][file]") {
  const TempDir dir;
  const std::string missing = (dir.path() / "missing.yaml").string();
  CHECK(only_load_problem(missing) ==
        missing + ": cannot read the spec: No such file or directory (fix: check the path and its permissions)");
  CHECK(only_load_problem(dir.str()) ==
        dir.str() + ": cannot read the spec: it is a directory (fix: check the path and its permissions)");
}

TEST_CASE("a spec file without read permission is one problem naming the path", "[config][file]") {
  if (::geteuid() == 0) SKIP("root reads any file");
  const TempDir dir;
  const fs::path file = dir.write("locked.yaml", "data: {path: x}\n");
  fs::permissions(file, fs::perms::none);
  CHECK(only_load_problem(file.string()) ==
        file.string() + ": cannot read the spec: Permission denied (fix: check the path and its permissions)");
}

// ------------------------------------------------------------------------------------------------------------
// The shipped documentation and example.

TEST_CASE("the example in configs/README.md is a valid spec", "[config][docs]") {
  const std::string yaml = ppctl::test::first_code_block(std::string(PPCTL_SOURCE_DIR) + "/configs/README.md", "yaml");
  REQUIRE_FALSE(yaml.empty());
  const TempDir dir;
  const fs::path text = dir.write("corpus/a.txt");
  const JobSpec spec = parse_ok(yaml, dir.str());
  CHECK(spec.model.layers == 8);
  CHECK(spec.pipeline.stages == 4);
  CHECK(spec.data.files == std::vector<std::string>{text.string()});
}

TEST_CASE("configs/example.yaml loads", "[config][docs]") {
  // Its data are the text of Debian's `fortunes` package, which scripts/setup.sh installs.
  const JobSpec spec = load_job_spec(std::string(PPCTL_SOURCE_DIR) + "/configs/example.yaml");
  CHECK(spec.pipeline.stages >= 1);
  CHECK_FALSE(spec.data.files.empty());
}

TEST_CASE("configs/example-llama.yaml loads as a grouped-query Llama", "[config][docs]") {
  const JobSpec spec = load_job_spec(std::string(PPCTL_SOURCE_DIR) + "/configs/example-llama.yaml");
  CHECK(spec.model.arch == Arch::Llama);
  CHECK(kv_heads_of(spec.model) == 2);
  CHECK(ffn_hidden_of(spec.model) == 512);
  CHECK_FALSE(spec.model.tie_embeddings);
  CHECK_FALSE(spec.data.files.empty());
}

// ------------------------------------------------------------------------------------------------------------
// Did-you-mean.

TEST_CASE("edit distance counts edits and adjacent swaps, ignoring case", "[config][suggest]") {
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("hidden", "hiden") == 1);
  CHECK(edit_distance("heads", "haeds") == 1);
  CHECK(edit_distance("GPipe", "gpipe") == 0);
  CHECK(edit_distance("", "abc") == 3);
}

TEST_CASE("closest_match accepts near misses and prefixes only", "[config][suggest]") {
  const std::vector<std::string> keys{"vocab_size", "layers", "hidden", "heads", "seq_len", "dropout"};
  CHECK(closest_match("hiden", keys).value_or("") == "hidden");
  CHECK(closest_match("seqlen", keys).value_or("") == "seq_len");
  CHECK(closest_match("vocab", keys).value_or("") == "vocab_size");
  CHECK_FALSE(closest_match("colour", keys).has_value());
  CHECK_FALSE(closest_match("xy", std::vector<std::string>{"lr"}).has_value());
  CHECK(did_you_mean("colour", keys) == "use one of vocab_size, layers, hidden, heads, seq_len, dropout");
  CHECK(did_you_mean("layer", keys) == "did you mean 'layers'?");
}

TEST_CASE("training-step fields: LR schedule, clipping, non-finite policy, recomputation", "[config]") {
  const auto spec = parse_job_spec(with_data("optimizer: {lr: 0.01, lr_schedule: cosine, warmup_steps: 20, "
                                             "min_lr: 0.001, clip_grad_norm: 1.5}\n"
                                             "train: {on_nonfinite: skip, recompute: blocks, recompute_every: 2}\n"),
                                   "job.yaml", corpus_dir().str());
  CHECK(spec.optimizer.lr_schedule == ppctl::config::LrSchedule::Cosine);
  CHECK(spec.optimizer.warmup_steps == 20);
  CHECK(spec.optimizer.min_lr == 0.001);
  CHECK(spec.optimizer.clip_grad_norm == 1.5);
  CHECK(spec.train.on_nonfinite == ppctl::config::NonFinitePolicy::Skip);
  CHECK(spec.train.recompute == ppctl::config::Recompute::Blocks);
  CHECK(spec.train.recompute_every == 2);

  const auto defaults = parse_job_spec(with_data(""), "job.yaml", corpus_dir().str());
  CHECK(defaults.optimizer.lr_schedule == ppctl::config::LrSchedule::Constant);
  CHECK(defaults.optimizer.clip_grad_norm == 0.0);
  CHECK(defaults.train.on_nonfinite == ppctl::config::NonFinitePolicy::Stop);
  CHECK(defaults.train.recompute == ppctl::config::Recompute::None);

  check(only_problem(with_data("optimizer: {lr: 0.01, lr_schedule: cosine,\n  min_lr: 0.1}\n")), 2,
        "optimizer.min_lr", "0.1", "must not exceed optimizer.lr (0.01)");
  check(only_problem(with_data("train: {recompute: some}\n")), 1, "train.recompute", "\"some\"",
        "must be one of none, full, blocks");
  check(only_problem(with_data("optimizer: {clip_grad_norm: -1}\n")), 1, "optimizer.clip_grad_norm", "-1",
        "must be in [0, 1000000]");
}

TEST_CASE("the learning-rate schedule fits in train.steps; min_lr only with a decaying schedule", "[config]") {
  // Constant: warmup may take every step (its last step reaches lr), not more.
  parse_ok(with_data("optimizer: {warmup_steps: 10}\ntrain: {steps: 10}\n"));
  auto m = only_problem(with_data("optimizer: {warmup_steps: 50}\ntrain: {steps: 10}\n"));
  check(m, 1, "optimizer.warmup_steps", "50",
        "must not exceed train.steps (10): the run would end during warmup, before reaching optimizer.lr");
  CHECK(m.hint == "lower optimizer.warmup_steps to at most 10, or raise train.steps to at least 50");
  // Default train.steps (100) is named as such through the rule's value.
  m = only_problem(with_data("optimizer: {warmup_steps: 101}\n"));
  CHECK(m.rule.find("train.steps (100)") != std::string::npos);
  // Cosine and linear need at least one step after warmup to decay to min_lr.
  for (const std::string schedule : {"cosine", "linear"}) {
    parse_ok(with_data("optimizer: {lr_schedule: " + schedule + ", warmup_steps: 9, min_lr: 0}\ntrain: {steps: 10}\n"));
    m = only_problem(with_data("optimizer: {lr_schedule: " + schedule + ", warmup_steps: 10}\ntrain: {steps: 10}\n"));
    check(m, 1, "optimizer.warmup_steps", "10",
          "must be below train.steps (10) for lr_schedule " + schedule +
              ": warmup would take every step, so the decay to optimizer.min_lr never happens");
    CHECK(m.hint == "lower optimizer.warmup_steps to at most 9, or raise train.steps to at least 11");
  }
  m = only_problem(with_data("optimizer: {lr_schedule: cosine, warmup_steps: 3}\ntrain: {steps: 1}\n"));
  CHECK(m.hint == "set optimizer.warmup_steps: 0, or raise train.steps to at least 4");
  // min_lr is a decay floor: written with a constant schedule, it would be ignored.
  m = only_problem(with_data("optimizer: {lr: 0.01,\n  min_lr: 0.001}\n"));
  check(m, 2, "optimizer.min_lr", "0.001", "applies only to lr_schedule cosine or linear (lr_schedule is constant, "
        "the default)");
  CHECK(m.hint == "remove optimizer.min_lr, or set optimizer.lr_schedule: cosine (or linear)");
}

TEST_CASE("hints suggest only values inside the field's range", "[config]") {
  const TempDir dir;
  // An empty or one-byte data file: model.seq_len cannot go below 1, so the only fix is more text.
  for (const std::string text : {std::string(), std::string("a")}) {
    dir.write("short.txt", text);
    const auto m = only_problem("data: {path: short.txt}\n", dir.str());
    CHECK(m.path == "data.path");
    CHECK(m.hint.find("lower model.seq_len") == std::string::npos);
    CHECK(m.hint.find("seq_len 0") == std::string::npos);
    CHECK(m.hint.find("add text") == 0);
  }
  dir.write("three.txt", "abc");
  CHECK(only_problem("data: {path: three.txt}\n", dir.str()).hint == "add text, or lower model.seq_len to 2 or less");
  // model.layers is at most 10,000: 1,024 stages x 64 virtual stages is not a layer count to suggest.
  auto m = only_problem(with_data("model: {layers: 100}\npipeline: {stages: 1024, schedule: interleaved-1f1b, "
                                  "virtual_stages: 64}\n"));
  CHECK(m.path == "pipeline.virtual_stages");
  CHECK(m.hint.find("raise model.layers") == std::string::npos);
  CHECK(m.hint.find("lower pipeline.") != std::string::npos);
  // train.steps is at most 1e9.
  m = only_problem(with_data("optimizer: {lr_schedule: cosine, warmup_steps: 1000000000}\n"));
  CHECK(m.hint == "lower optimizer.warmup_steps to at most 99");
}

TEST_CASE("a long value is cut where a message echoes it", "[config]") {
  const std::string huge(100'000, 'x');  // well under the spec's size limit (kMaxSpecBytes)
  const std::vector<std::string> specs = {
      with_data("model: {hidden: " + huge + "}\n"),             // a plain scalar of the wrong type
      with_data("model: {activation: \"" + huge + "\"}\n"),   // an unknown enum value
      with_data("model: {" + huge + ": 1}\n"),                 // an unknown key
      with_data("pipeline: {stages: [" + std::string(100'000, '1') + ", 2]}\n"),  // a list for a number
      "data: {path: " + huge + "}\n",                              // a file that does not exist
  };
  for (const auto& yaml : specs) {
    for (const auto& line : problems_of(yaml)) {
      INFO(line.substr(0, 300));
      CHECK(line.size() < 1000);
    }
  }
  CHECK_THAT(problems_of(specs[0]).at(0), ContainsSubstring("xxx... (100002 bytes in all): "));  // with quotes
  CHECK(ppctl::core::echo_value("short") == "short");
  CHECK(ppctl::core::echo_value(std::string(ppctl::core::kMaxEchoChars, 'y')) ==
        std::string(ppctl::core::kMaxEchoChars, 'y'));
  // A multi-byte UTF-8 character across the cut is left out whole, not split.
  const std::string accents = std::string(ppctl::core::kMaxEchoChars - 1, 'a') + "\xc3\xa9" + "tail";
  CHECK(ppctl::core::echo_value(accents) ==
        std::string(ppctl::core::kMaxEchoChars - 1, 'a') + "... (" + std::to_string(accents.size()) + " bytes in all)");
}

TEST_CASE("eval and checkpoint sections: defaults, values, and the keys they need", "[config]") {
  const auto defaults = parse_job_spec(with_data(""), "job.yaml", corpus_dir().str());
  CHECK(defaults.eval.interval == 0);
  CHECK(defaults.data.eval_fraction == 0.0);
  CHECK(defaults.checkpoint.dir.empty());

  const auto spec = parse_job_spec(
      "data: {path: corpus.txt, eval_fraction: 0.05}\neval: {interval: 50, batches: 3}\n"
      "checkpoint: {dir: ckpt/run1, interval: 100, keep: 2}\n",
      "job.yaml", corpus_dir().str());
  CHECK(spec.data.eval_fraction == 0.05);
  CHECK(spec.eval.interval == 50);
  CHECK(spec.eval.batches == 3);
  CHECK(spec.checkpoint.dir == (corpus_dir().path() / "ckpt/run1").string());  // against the spec's folder
  CHECK(spec.checkpoint.interval == 100);
  CHECK(spec.checkpoint.keep == 2);

  check(only_problem(with_data("eval: {interval: 10}\n")), 1, "eval.interval", "10",
        "needs held-out text, but data.eval_fraction is 0");
  check(only_problem(with_data("checkpoint: {interval: 10}\n")), 1, "checkpoint.interval", "10",
        "needs checkpoint.dir (the folder to write checkpoints to)");
  check(only_problem("data: {path: corpus.txt, eval_fraction: 0.6}\n"), 1, "data.eval_fraction", "0.6",
        "must be in [0, 0.5]");
  check(only_problem(with_data("checkpoint: {dir: corpus.txt}\n")), 1, "checkpoint.dir", "\"corpus.txt\"",
        "names a file, not a folder");

  const TempDir small;
  small.write("short.txt", std::string(20, 'x'));  // one sequence of 16 + 1 bytes
  const auto no_training = only_problem(
      "model: {seq_len: 16}\ndata: {path: short.txt, eval_fraction: 0.1}\n", small.str());
  check(no_training, 2, "data.eval_fraction", "0.1",
        "leaves no training sequence: the text holds 1 sequence(s) of model.seq_len + 1 bytes and 1 "
        "would be held out");
}

TEST_CASE("observe fields: runs folder, traced steps, peak TFLOP/s, TensorBoard", "[config]") {
  const auto spec = parse_job_spec(with_data("observe: {runs_dir: /srv/runs, trace_steps: 0, peak_tflops: 2.5}\n"),
                                   "job.yaml", corpus_dir().str());
  CHECK(spec.observe.runs_dir == "/srv/runs");
  CHECK(spec.observe.trace_steps == 0);
  CHECK(spec.observe.peak_tflops == 2.5);

  const auto defaults = parse_job_spec(with_data(""), "job.yaml", corpus_dir().str());
  CHECK(defaults.observe.runs_dir == "runs");
  CHECK(defaults.observe.trace_steps == 20);
  CHECK(defaults.observe.peak_tflops == 0.0);
  CHECK(defaults.observe.tensorboard);
  CHECK_FALSE(parse_job_spec(with_data("observe: {tensorboard: false}\n"), "job.yaml", corpus_dir().str())
                  .observe.tensorboard);
  check(only_problem(with_data("observe: {tensorboard: maybe}\n")), 1, "observe.tensorboard", "\"maybe\"",
        "must be true or false");

  check(only_problem(with_data("observe: {trace_steps: -1}\n")), 1, "observe.trace_steps", "-1",
        "must be in [0, 1000000]");
  check(only_problem(with_data("observe: {peak_tflops: -2}\n")), 1, "observe.peak_tflops", "-2",
        "must be in [0, 1000000]");
  check(only_problem(with_data("observe: {runs_dir: \"\"}\n")), 1, "observe.runs_dir", "\"\"",
        "must be a non-empty folder");
}

// ------------------------------------------------------------------------------------------------------------
// Model architecture fields (model.arch and the fields that belong to one architecture).

TEST_CASE("model.arch: gpt2 by default; llama unties the head unless tie_embeddings is written", "[config][arch]") {
  const JobSpec gpt2 = parse_ok(with_data("model: {layers: 4}\n"));
  CHECK(gpt2.model.arch == Arch::Gpt2);
  CHECK(gpt2.model.activation == Activation::Gelu);
  CHECK(gpt2.model.norm_eps == 1e-5);
  CHECK(gpt2.model.tie_embeddings);
  const JobSpec llama = parse_ok(with_data("model: {arch: llama, kv_heads: 2, rope_theta: 500000, "
                                           "norm_eps: 1e-6, ffn_hidden: 300}\n"));
  CHECK(llama.model.arch == Arch::Llama);
  CHECK_FALSE(llama.model.tie_embeddings);
  CHECK(llama.model.kv_heads == 2);
  CHECK(llama.model.rope_theta == 500000.0);
  CHECK(llama.model.norm_eps == 1e-6);
  CHECK(llama.model.ffn_hidden == 300);
  CHECK(parse_ok(with_data("model: {arch: llama, tie_embeddings: true}\n")).model.tie_embeddings);
  CHECK(parse_ok(with_data("model: {activation: gelu_tanh}\n")).model.activation == Activation::GeluTanh);
  CHECK(to_string(Arch::Llama) == "llama");
  CHECK(to_string(Activation::GeluTanh) == "gelu_tanh");
}

TEST_CASE("ffn_hidden 0 and kv_heads 0 resolve to each architecture's rule", "[config][arch]") {
  ModelSpec m;
  m.hidden = 128;
  CHECK(ffn_hidden_of(m) == 512);
  m.arch = Arch::Llama;
  // Meta's llama/model.py: int(2 * 4h / 3), rounded up to a multiple of 256.
  CHECK(ffn_hidden_of(m) == 512);   // 341 -> 512
  m.hidden = 4096;
  CHECK(ffn_hidden_of(m) == 11008);  // Llama-2 7B
  m.hidden = 5120;
  CHECK(ffn_hidden_of(m) == 13824);  // Llama-2 13B
  m.hidden = 384;
  CHECK(ffn_hidden_of(m) == 1024);   // exactly 1024: no rounding
  m.ffn_hidden = 300;
  CHECK(ffn_hidden_of(m) == 300);
  m.heads = 8;
  CHECK(kv_heads_of(m) == 8);
  m.kv_heads = 2;
  CHECK(kv_heads_of(m) == 2);
}

TEST_CASE("an unknown model.arch or activation lists the allowed values", "[config][arch][enum]") {
  const Message arch = only_problem(with_data("model:\n  arch: llama3\n"));
  check(arch, 2, "model.arch", "\"llama3\"", "must be one of gpt2, llama, qwen2, qwen3, mistral");
  CHECK(arch.hint == "did you mean 'llama'?");
  const Message other = only_problem(with_data("model:\n  arch: bert\n"));
  check(other, 2, "model.arch", "\"bert\"", "must be one of gpt2, llama, qwen2, qwen3, mistral");
  const Message act = only_problem(with_data("model:\n  activation: gelu_new\n"));
  check(act, 2, "model.activation", "\"gelu_new\"", "must be one of gelu, gelu_tanh");
  CHECK(act.hint == "did you mean 'gelu_tanh'?");
}

TEST_CASE("fields of one architecture are refused for the other", "[config][arch][combination]") {
  const Message act = only_problem(with_data("model:\n  arch: llama\n  activation: gelu\n"));
  check(act, 3, "model.activation", "\"gelu\"", "applies only to model.arch gpt2 (model.arch is llama)");
  CHECK(act.hint == "remove model.activation, or set model.arch: gpt2");
  const Message rope = only_problem(with_data("model:\n  layers: 4\n  rope_theta: 10000\n"));
  check(rope, 3, "model.rope_theta", "10000",
        "applies only to model.arch llama, qwen2, qwen3 or mistral (model.arch is gpt2, the default)");
  const Message kv = only_problem(with_data("model:\n  arch: gpt2\n  kv_heads: 2\n"));
  check(kv, 3, "model.kv_heads", "2", "applies only to model.arch llama, qwen2, qwen3 or mistral (model.arch is gpt2)");
  // A broken arch is reported once, without the combination.
  check(only_problem(with_data("model:\n  arch: x\n  rope_theta: 1e4\n")), 2, "model.arch", "\"x\"",
        "must be one of gpt2, llama, qwen2, qwen3, mistral");
}

TEST_CASE("kv_heads must divide heads, and llama's head size must be even", "[config][arch][combination]") {
  const Message kv = only_problem(with_data("model:\n  arch: llama\n  heads: 4\n  kv_heads: 3\n"));
  check(kv, 4, "model.kv_heads", "3", "must divide model.heads (4)");
  CHECK(kv.hint == "use a divisor of 4 such as 2 or 4, or 0 for kv_heads = heads");
  const Message odd = only_problem(with_data("model:\n  arch: llama\n  hidden: 12\n  heads: 4\n"));
  check(odd, 4, "model.heads", "4",
        "gives an odd head size hidden / heads = 3; rotary embeddings (llama) rotate pairs of features, so it "
        "must be even");
  CHECK(parse_ok(with_data("model: {hidden: 12, heads: 4}\n")).model.heads == 4);  // gpt2: any head size
  const Message hidden = only_problem(with_data("model:\n  arch: llama\n  hidden: 130\n"));
  check(hidden, 3, "model.heads", "4 (default)", "must divide model.hidden (130)");
}

TEST_CASE("the new model fields' ranges", "[config][arch][range]") {
  struct Case {
    std::string yaml;
    std::string path;
    std::string value;
    std::string rule;
  };
  const Case bad = GENERATE(Case{"norm_eps: 0", "model.norm_eps", "0", "must be in (0, 1)"},
                            Case{"norm_eps: 1", "model.norm_eps", "1", "must be in (0, 1)"},
                            Case{"rope_theta: 1", "model.rope_theta", "1", "must be in (1, 1000000000000]"},
                            Case{"ffn_hidden: -1", "model.ffn_hidden", "-1", "must be in [0, 1000000]"},
                            Case{"kv_heads: -1", "model.kv_heads", "-1", "must be in [0, 65536]"});
  const Message m = only_problem(with_data("model:\n  arch: llama\n  " + bad.yaml + "\n"));
  check(m, 3, bad.path, bad.value, bad.rule);
}

TEST_CASE("restart fields: train.max_restarts and train.restart_backoff_s", "[config]") {
  const auto defaults = parse_job_spec(with_data(""), "job.yaml", corpus_dir().str());
  CHECK(defaults.train.max_restarts == 0);
  CHECK(defaults.train.restart_backoff_s == 1.0);
  const auto spec = parse_job_spec(with_data("train: {max_restarts: 3, restart_backoff_s: 0.5}\n"), "job.yaml",
                                   corpus_dir().str());
  CHECK(spec.train.max_restarts == 3);
  CHECK(spec.train.restart_backoff_s == 0.5);
  check(only_problem(with_data("train: {max_restarts: -1}\n")), 1, "train.max_restarts", "-1",
        "must be in [0, 1000]");
  check(only_problem(with_data("train: {restart_backoff_s: 4000}\n")), 1, "train.restart_backoff_s", "4000",
        "must be in [0, 3600]");
}

TEST_CASE("a command-line --steps is validated with the spec, named as the source of the value", "[config][override]") {
  const std::string yaml = with_data("optimizer: {lr_schedule: cosine, warmup_steps: 5}\ntrain: {steps: 10}\n");
  const auto base = corpus_dir().str();
  CHECK(parse_job_spec(yaml, "job.yaml", base, {20}).train.steps == 20);  // the effective value
  // The issue's case: the spec's steps: 10 fits warmup 5, --steps 4 does not; the same rule as steps: 4 in the spec.
  std::vector<std::string> problems;
  try {
    parse_job_spec(yaml, "job.yaml", base, {4});
    FAIL("--steps 4 with warmup_steps 5 was accepted");
  } catch (const ppctl::ConfigError& e) {
    problems = e.problems();
  }
  REQUIRE(problems.size() == 1);
  const auto m = split(problems[0]);
  check(m, 1, "optimizer.warmup_steps", "5",
        "must be below the step count (--steps 4) for lr_schedule cosine: warmup would take every step, so the "
        "decay to optimizer.min_lr never happens");
  CHECK(m.hint == "lower optimizer.warmup_steps to at most 3, or pass --steps 6 or more");
  // An override replaces the spec's value before validation: a spec value the rule refuses is fine when replaced.
  CHECK(parse_job_spec(with_data("optimizer: {lr_schedule: cosine, warmup_steps: 5}\ntrain: {steps: 4}\n"),
                       "job.yaml", base, {6})
            .train.steps == 6);
  // Out of range (the worker's --steps has no CLI11 range check): named by the option, listed first.
  try {
    parse_job_spec(yaml, "job.yaml", base, {0});
    FAIL("--steps 0 was accepted");
  } catch (const ppctl::ConfigError& e) {
    REQUIRE(e.problems().size() == 1);
    CHECK(e.problems()[0] == "--steps 0: must be in [1, 1000000000] (fix: give a step count of at least 1)");
  }
}

TEST_CASE("integer fields take one spelling: no '+', no leading zeros, no hex, exponent or fraction",
          "[config]") {
  CHECK(parse_ok(with_data("train: {max_restarts: 3, seed: 0}\n")).train.max_restarts == 3);
  CHECK(parse_ok(with_data("optimizer: {lr: +0.01}\n")).optimizer.lr == 0.01);  // reals: YAML 1.2 floats
  for (const auto& [value, hint] : std::vector<std::pair<std::string, std::string>>{
           {"+3", "write 3"}, {"03", "write 3"}, {"-0", "write 0"}, {"+0", "write 0"}}) {
    const auto m = only_problem(with_data("train: {max_restarts: " + value + "}\n"));
    check(m, 1, "train.max_restarts", value,
          "must be an integer written in plain decimal digits, without a '+' sign or leading zeros");
    CHECK(m.hint == hint);
  }
  for (const auto& [value, hint] : std::vector<std::pair<std::string, std::string>>{
           {"0x3", "write a whole number such as 0"}, {"3e0", "write it in digits: 3"}, {"3.0", "write it in digits: 3"}}) {
    const auto m = only_problem(with_data("train: {max_restarts: " + value + "}\n"));
    check(m, 1, "train.max_restarts", value == "0x3" ? "\"0x3\"" : value, "must be an integer");  // not a number: a string
    CHECK(m.hint == hint);
  }
  // Every integer field goes through the same reader.
  check(only_problem(with_data("pipeline: {stages: +2}\n")), 1, "pipeline.stages", "+2",
        "must be an integer written in plain decimal digits, without a '+' sign or leading zeros");
}

TEST_CASE("field_location gives a key's SPEC:LINE for problems found after loading", "[config]") {
  const std::string text = "train: {steps: 5}\nobserve:\n  runs_dir: somewhere\ndata:\n  blend:\n"
                           "    - {weight: 1, path: a}\n    - weight: 1\n      path: b\n";
  CHECK(field_location(text, "job.yaml", "observe.runs_dir") == "job.yaml:3");
  CHECK(field_location(text, "job.yaml", "data.blend[0].path") == "job.yaml:6");
  CHECK(field_location(text, "job.yaml", "data.blend[1].path") == "job.yaml:8");
  CHECK(field_location(text, "job.yaml", "checkpoint.dir") == "job.yaml");  // not written: the file alone
  CHECK(field_location(text, "job.yaml", "data.blend[2].path") == "job.yaml");
  CHECK(field_location("[unclosed", "job.yaml", "observe.runs_dir") == "job.yaml");
}

TEST_CASE("pipeline.layers_per_stage and pipeline.balance: read and checked against the model", "[config][layout]") {
  const JobSpec split = parse_ok(with_data("model: {layers: 8}\npipeline: {stages: 2, virtual_stages: 2, schedule: "
                                           "interleaved-1f1b, layers_per_stage: [1, 3, 3, 1]}\n"));
  CHECK(split.pipeline.layers_per_stage == std::vector<int64_t>{1, 3, 3, 1});
  CHECK(split.pipeline.balance == "uniform");
  CHECK(parse_ok(with_data("pipeline: {balance: auto}\n")).pipeline.balance == "auto");

  const Message sum = only_problem(with_data("model: {layers: 12}\npipeline:\n  stages: 4\n  layers_per_stage: "
                                             "[3, 3, 2, 2]\n"));
  check(sum, 4, "pipeline.layers_per_stage", "[3, 3, 2, 2]", "sums to 10 but model.layers is 12");
  CHECK(sum.hint == "make the entries add up to 12 (or set model.layers: 10)");

  const Message count = only_problem(with_data("model: {layers: 12}\npipeline:\n  stages: 4\n  layers_per_stage: "
                                               "[4, 4, 4]\n"));
  check(count, 4, "pipeline.layers_per_stage", "[4, 4, 4]",
        "has 3 entries but pipeline.stages x pipeline.virtual_stages = 4 x 1 = 4");
  CHECK(count.hint == "give one block count per stage (4 entries), in stage order");

  const Message both = only_problem(with_data("model: {layers: 4}\npipeline:\n  stages: 2\n  balance: auto\n"
                                              "  layers_per_stage: [3, 1]\n"));
  check(both, 5, "pipeline.layers_per_stage", "[3, 1]",
        "excludes pipeline.balance auto (an explicit split, or one chosen by ppctl, not both)");

  check(only_problem(with_data("model: {layers: 4}\npipeline: {stages: 2, layers_per_stage: [4, 0]}\n")), 2,
        "pipeline.layers_per_stage[1]", "0", "must be in [1, 10000]; every stage holds at least one block");
  check(only_problem(with_data("pipeline: {layers_per_stage: []}\n")), 1, "pipeline.layers_per_stage", "[]",
        "must be a non-empty list of block counts, one per stage (stages x virtual_stages entries)");
  const Message typo = only_problem(with_data("pipeline: {balance: atuo}\n"));
  check(typo, 1, "pipeline.balance", "\"atuo\"", "must be one of uniform, auto");
  CHECK(typo.hint == "did you mean 'auto'?");
}

TEST_CASE("runtime.device_memory_gib: GiB of one worker's device, 0 (not given) by default", "[config]") {
  CHECK(parse_job_spec(with_data("runtime: {device_memory_gib: 79.6}\n"), "job.yaml", corpus_dir().str())
            .runtime.device_memory_gib == 79.6);
  CHECK(parse_job_spec(with_data(""), "job.yaml", corpus_dir().str()).runtime.device_memory_gib == 0.0);
  check(only_problem(with_data("runtime: {device_memory_gib: -1}\n")), 1, "runtime.device_memory_gib", "-1",
        "must be in [0, 1000000]");
}

TEST_CASE("runtime.cpu_binding: cores by default, or none", "[config]") {
  CHECK(parse_job_spec(with_data(""), "job.yaml", corpus_dir().str()).runtime.cpu_binding == CpuBinding::Cores);
  CHECK(parse_job_spec(with_data("runtime: {cpu_binding: none}\n"), "job.yaml", corpus_dir().str())
            .runtime.cpu_binding == CpuBinding::None);
  const Message typo = only_problem(with_data("runtime: {cpu_binding: off}\n"));
  check(typo, 1, "runtime.cpu_binding", "\"off\"", "must be one of cores, none");
  CHECK(typo.hint == "did you mean 'none'?");
}

TEST_CASE("a spec's values and keys with escape sequences reach the message escaped", "[config]") {
  // Issue 25 item 7: `layers: "\e[31mX"` was printed as it is (it recolours the terminal).
  for (const auto& yaml : {with_data("model: {layers: \"\\e[31mX\"}\n"), with_data("model: {\"\\e]0;t\\a\": 1}\n"),
                           std::string("data: {path: \"corpus\\e[2J.txt\"}\n")}) {
    const auto problems = problems_of(yaml);
    REQUIRE(problems.size() == 1);
    INFO(problems[0]);
    CHECK(problems[0].find('\x1b') == std::string::npos);
    CHECK(problems[0].find('\x07') == std::string::npos);
    CHECK(problems[0].find("\\x1b") != std::string::npos);
  }
}

TEST_CASE("a line indented with a tab is named as such, not as yaml-cpp's illegal map value", "[config]") {
  // Issue 26: `\tlayers: 4` under model: gave "invalid YAML: illegal map value".
  for (const auto& [yaml, line] : {std::pair{std::string("model:\n\tlayers: 4\n"), 2},
                                   std::pair{std::string("model:\n  layers: 4\n  \thidden: 32\n"), 3},
                                   std::pair{std::string("model:\n  layers: 4\n\t\n  hidden: x: y\n"), 3}}) {
    const auto problems = problems_of(with_data(yaml));
    REQUIRE(problems.size() == 1);
    CHECK(problems[0] == fmt::format("job.yaml:{}: line {} is indented with a tab; YAML allows only spaces (fix: indent "
                                     "with spaces, e.g. two per level)",
                                     line, line));
  }
  // A tab inside a value is not indentation: the parser's own message stays.
  const auto other = problems_of(with_data("model: {layers: [1,\t2}\n"));
  REQUIRE(other.size() == 1);
  CHECK(other[0].find("invalid YAML") != std::string::npos);
}

TEST_CASE("a spec over 1 MiB is refused before parsing, naming its size and the limit", "[config]") {
  // Issue 26: nothing bounded a spec's size (a 50 MB YAML list took 5.8 GB to parse), and one of 128 KiB or
  // more passed `plan` and failed `train` (the text reached the workers in an environment variable).
  const std::string base = with_data("model: {layers: 2}\n");
  const auto padded = [&](std::size_t size) { return base + "#" + std::string(size - base.size() - 2, 'x') + "\n"; };
  REQUIRE(ppctl::config::kMaxSpecBytes == 1024 * 1024);
  CHECK_NOTHROW(parse_job_spec(padded(ppctl::config::kMaxSpecBytes), "job.yaml", corpus_dir().str()));
  const auto over = problems_of(padded(ppctl::config::kMaxSpecBytes + 1));
  REQUIRE(over.size() == 1);
  CHECK(over[0] == "job.yaml: the spec is 1048577 bytes (1.0 MiB), over the limit of 1048576 bytes (1 MiB) that "
                   "ppctl reads (fix: keep long lists out of the spec: data.path takes globs such as corpus/*.txt "
                   "instead of one entry per file, and many small datasets can be made one with `ppctl data "
                   "prepare`; comments count too)");
  // From a file: refused by its size, before reading it; the same limit as for the text.
  corpus_dir().write("big.yaml", padded(2 * ppctl::config::kMaxSpecBytes));
  const auto big = corpus_dir().path() / "big.yaml";
  for (const auto& read : {std::function<void()>([&] { load_job_spec(big.string()); }),
                           std::function<void()>([&] { ppctl::config::read_spec_file(big.string()); })}) {
    try {
      read();
      FAIL("accepted");
    } catch (const ppctl::ConfigError& e) {
      CHECK_THAT(e.what(), StartsWith(big.string() + ": the spec is 2097152 bytes (2.0 MiB), over the limit of "
                                                     "1048576 bytes (1 MiB)"));
    }
  }
  corpus_dir().write("at_limit.yaml", padded(ppctl::config::kMaxSpecBytes));
  CHECK(ppctl::config::read_spec_file((corpus_dir().path() / "at_limit.yaml").string()).size() ==
        ppctl::config::kMaxSpecBytes);
  // A file without a size (a character device) is read no further than the limit: /dev/zero ends.
  try {
    ppctl::config::read_spec_file("/dev/zero");
    FAIL("accepted");
  } catch (const ppctl::ConfigError& e) {
    CHECK_THAT(e.what(), StartsWith("/dev/zero: the spec is more than that, over the limit of 1048576 bytes"));
  }
}

TEST_CASE("absurd list lengths are refused before their entries are read, naming the field and the count",
          "[config][data]") {
  // Issue 26: 1.6 million data.path globs took 125 s. Every entry below names a file that exists, so only
  // the length can be what is refused.
  const auto list_of = [](std::size_t n, const std::string& item) {
    std::string text = "[";
    for (std::size_t i = 0; i < n; ++i) text += (i ? ", " : "") + item;
    return text + "]";
  };
  const std::size_t limit = ppctl::config::kMaxDataPaths;
  REQUIRE(limit == 10'000);
  CHECK_NOTHROW(parse_job_spec("data: {path: " + list_of(limit, "corpus.txt") + "}\n", "job.yaml", corpus_dir().str()));
  auto problems = problems_of("model: {layers: 2}\ndata: {path: " + list_of(limit + 1, "corpus.txt") + "}\n");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "job.yaml:2: data.path: a list of 10001 entries, more than the 10000 that ppctl reads (fix: "
                       "match the files with globs (corpus/*.txt, shards/part-*.txt) instead of one entry per file)");
  // data.blend: its entries, and all its paths together.
  REQUIRE(ppctl::config::kMaxBlendEntries == 10'000);
  problems = problems_of("data: {blend: " + list_of(10'001, "{weight: 1, path: corpus.txt, format: text}") + "}\n");
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], StartsWith("job.yaml:1: data.blend: a list of 10001 entries, more than the 10000 that "
                                     "ppctl reads (fix: merge the datasets"));
  problems = problems_of("data: {blend: " +
                         list_of(2, "{weight: 1, format: text, path: " + list_of(5'001, "corpus.txt") + "}") + "}\n");
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "job.yaml:1: data.blend: its entries' paths hold 10002 entries, more than the 10000 that ppctl "
                       "reads (fix: match the files with globs (corpus/*.txt, shards/part-*.txt) instead of one entry "
                       "per file)");
  // One blend entry's path list alone.
  problems = problems_of("data: {blend: [{weight: 1, format: text, path: " + list_of(10'001, "corpus.txt") + "}]}\n");
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], StartsWith("job.yaml:1: data.blend: its entries' paths hold 10001 entries"));
  // pipeline.layers_per_stage: one entry per stage, each at least one of model.layers' (at most 10,000) blocks.
  const Message layers = only_problem(with_data("pipeline: {layers_per_stage: " + list_of(10'001, "1") + "}\n"));
  CHECK(layers.path == "pipeline.layers_per_stage");
  CHECK(!layers.value);
  CHECK(layers.rule == "a list of 10001 entries, more than the 10000 that ppctl reads (model.layers is at most 10000)");
}
