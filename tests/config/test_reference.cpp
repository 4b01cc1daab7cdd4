// Tests for config/reference: `ppctl help` and the generated spec reference show every field of the schema
// with the type, range and default the loader applies, and an unknown topic gets a fix.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <string>

#include "config/job_spec.hpp"
#include "config/reference.hpp"
#include "config/schema.hpp"
#include "core/error.hpp"

using namespace ppctl::config;
using Catch::Matchers::ContainsSubstring;

namespace {

/// The message spec_help throws for `topic`; "" when it does not throw.
std::string help_error(const std::string& topic) {
  try {
    spec_help(topic);
  } catch (const ppctl::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the reference holds every section and field of the schema, in order", "[reference]") {
  JobSpec spec;
  detail::DataEntries entries;
  const auto schema = detail::schema(spec, entries);
  const auto reference = spec_reference();
  REQUIRE(reference.size() == schema.size());
  const std::string markdown = spec_reference_markdown();
  for (std::size_t s = 0; s < schema.size(); ++s) {
    CHECK(reference[s].name == schema[s].name);
    CHECK_FALSE(reference[s].doc.empty());
    CHECK_THAT(markdown, ContainsSubstring("\n## " + schema[s].name + "\n"));
    REQUIRE(reference[s].fields.size() == schema[s].fields.size());
    for (std::size_t f = 0; f < schema[s].fields.size(); ++f) {
      const auto& doc = reference[s].fields[f];
      CHECK(doc.path() == schema[s].name + "." + schema[s].fields[f].key);
      CHECK(doc.doc == schema[s].fields[f].doc);
      CHECK_THAT(markdown, ContainsSubstring("| `" + doc.path() + "` |"));
      CHECK_THAT(spec_help(doc.path()), ContainsSubstring(doc.doc));
    }
  }
}

TEST_CASE("a field's help gives the loader's default, range and choices", "[reference]") {
  const JobSpec fresh;
  const std::string stages = spec_help("pipeline.stages");
  CHECK_THAT(stages, ContainsSubstring("type:    integer"));
  CHECK_THAT(stages, ContainsSubstring("range:   1 to 1024"));
  CHECK_THAT(stages, ContainsSubstring("default: " + std::to_string(fresh.pipeline.stages)));
  const std::string schedule = spec_help("pipeline.schedule");
  for (const char* kind : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv", "zb-auto", "custom"})
    CHECK_THAT(schedule, ContainsSubstring(kind));
  CHECK_THAT(schedule, ContainsSubstring("default: " + to_string(fresh.pipeline.schedule)));
  CHECK_THAT(spec_help("model.dropout"), ContainsSubstring("range:   [0, 1)"));
  CHECK_THAT(spec_help("checkpoint.dir"), ContainsSubstring("default: (none)"));
  CHECK_THAT(spec_help("optimizer.betas"), ContainsSubstring("list of numbers"));
}

TEST_CASE("help finds a bare key, lists a section and everything", "[reference]") {
  CHECK(spec_help("microbatches") == spec_help("pipeline.microbatches"));
  const std::string section = spec_help("checkpoint");
  for (const char* field : {"checkpoint.dir", "checkpoint.interval", "checkpoint.keep"})
    CHECK_THAT(section, ContainsSubstring(field));
  const std::string all = spec_help("");
  for (const auto& s : spec_reference())
    for (const auto& f : s.fields) CHECK_THAT(all, ContainsSubstring(f.path()));
}

TEST_CASE("an unknown help topic names it and the fix", "[reference]") {
  CHECK_THAT(help_error("pipeline.stage"), ContainsSubstring("did you mean 'pipeline.stages'?"));
  CHECK_THAT(help_error("pipeline.layers"), ContainsSubstring("the field is model.layers"));
  CHECK_THAT(help_error("num_layers"), ContainsSubstring("model.layers"));  // Megatron-LM's name
  CHECK_THAT(help_error("interval"), ContainsSubstring("eval.interval, checkpoint.interval"));
  CHECK_THAT(help_error("qwertyuiop"), ContainsSubstring("`ppctl help` lists every section and field"));
  CHECK_THAT(help_error("qwertyuiop"), ContainsSubstring("'qwertyuiop'"));
  CHECK_THAT(help_error("learning_rate"), ContainsSubstring("optimizer.lr"));  // Hugging Face Trainer's name
  CHECK_THAT(help_error("n_layer"), ContainsSubstring("model.layers"));       // nanoGPT's
  // What the user typed is shown escaped and cut: no control character reaches the terminal.
  const std::string evil = help_error("pipe\x1b[31mline\a");
  CHECK(evil.find('\x1b') == std::string::npos);
  CHECK(evil.find('\a') == std::string::npos);
  CHECK_THAT(evil, ContainsSubstring("pipe\\x1b[31mline\\x07"));
  CHECK(help_error(std::string(5000, 'x')).size() < 1000);
}

TEST_CASE("the markdown escapes a '|' inside a cell", "[reference]") {
  const std::string markdown = spec_reference_markdown();
  std::size_t rows = 0;
  for (std::size_t at = markdown.find("\n| `"); at != std::string::npos; at = markdown.find("\n| `", at + 1)) {
    const auto end = markdown.find('\n', at + 1);
    const std::string row = markdown.substr(at + 1, end - at - 1);
    std::size_t bars = 0;
    for (std::size_t i = 0; i < row.size(); ++i) bars += row[i] == '|' && (i == 0 || row[i - 1] != '\\');
    CHECK(bars == 6);  // five cells
    ++rows;
  }
  std::size_t fields = 0;
  for (const auto& s : spec_reference()) fields += s.fields.size();
  CHECK(rows == fields);
}
