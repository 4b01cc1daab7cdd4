// Tests for config/load on whole YAML documents: empty, not a mapping, syntax errors, several documents,
// tab indentation, every problem at once, and the limits on a spec's size and its lists' lengths.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <fmt/format.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "core/error.hpp"
#include "support/load_helpers.hpp"

using Catch::Matchers::StartsWith;
using namespace ppctl::config;
using namespace ppctl::config::load_test;

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

// ------------------------------------------------------------------------------------------------------------
// Size limits.

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

TEST_CASE("a file in another format is named: TOML, or a second top-level value", "[config][document]") {
  // torchtitan's job files are TOML.
  const auto toml = problems_of("# torchtitan job\n[job]\ndump_folder = \"./outputs\"\n\n[model]\nname = \"llama3\"\n"
                                "[[extra]]\nflavor = \"debugmodel\"\n");
  REQUIRE(toml.size() == 1);
  CHECK_THAT(toml[0], StartsWith("job.yaml:2: the file is TOML ([table] headers and key = value lines"));
  CHECK(toml[0].find("not YAML") != std::string::npos);
  CHECK(toml[0].find("'---'") == std::string::npos);
  // Two JSON objects, one after the other: no '---' to remove.
  for (const std::string& text : {std::string("{\"model\": {\"layers\": 2}}\n{\"train\": {\"steps\": 3}}\n"),
                                  std::string("{\"model\": {\"layers\": 2}}{\"train\": {\"steps\": 3}}\n")}) {
    INFO(text);
    const auto json = problems_of(text);
    REQUIRE(json.size() == 1);  // the first object's missing keys would only mislead
    CHECK(json.back().find("a second top-level value starts here (2 in all); a spec is one mapping") !=
          std::string::npos);
    CHECK(json.back().find("'---'") == std::string::npos);
  }
  // YAML that merely holds '=' or brackets is read as YAML (its one problem, a misspelt key, is YAML's).
  const auto yaml = problems_of(with_data("model: {layers: 2, hiden: 3}\ntrain: {seed: 3}  # a = b\n") +
                                "pipeline:\n  layers_per_stage: [1, 1]\n  stages: 2\n  schedule: \"[x] = y\"\n");
  REQUIRE(yaml.size() == 2);
  for (const auto& p : yaml) CHECK(p.find("TOML") == std::string::npos);
}
