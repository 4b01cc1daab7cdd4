// Test support for config/load's tests (tests/config/test_load*.cpp): a temp folder, a shared valid corpus, and
// parse_job_spec's problems for a YAML text, split into their fields (file, line, path, value, rule, fix).
#pragma once

#include <catch2/catch_test_macros.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "core/error.hpp"
#include "support/temp_dir.hpp"

namespace ppctl::config::load_test {

/// 400 bytes of text: more than model.seq_len + 1 for the default seq_len (128).
inline const std::string kText = std::string(399, 'a') + "\n";

/// A fresh folder under the system temp dir (ppctl::test::TempDir), removed with everything in it at the end
/// of the test, with a writer of files inside it.
class TempDir {
 public:
  const std::filesystem::path& path() const { return dir_.path; }
  std::string str() const { return dir_.path.string(); }

  /// Writes `content` to `relative` (creating folders) and returns the absolute path. The default
  /// text is longer than the default model.seq_len, so a spec using it is valid.
  std::filesystem::path write(const std::string& relative, const std::string& content = kText) const {
    const std::filesystem::path file = dir_.path / relative;
    ppctl::test::write_checked(file, content);
    return file;
  }

 private:
  ppctl::test::TempDir dir_{"ppctl_config_test_"};
};

/// A folder holding `corpus.txt`, shared by tests that need a valid data.path but test something else.
/// It holds 1,000,001 bytes: enough for the largest model.seq_len (1,000,000).
inline const TempDir& corpus_dir() {
  static const TempDir dir;
  static const bool written = (dir.write("corpus.txt", std::string(1000000, 'a') + "\n"), true);
  (void)written;
  return dir;
}

/// `yaml` followed by a valid data section (appended, so the lines of `yaml` keep their numbers).
inline std::string with_data(const std::string& yaml) { return yaml + "data: {path: corpus.txt}\n"; }

/// The problems parse_job_spec reports for `yaml` (source name `job.yaml`); fails the test if it accepts it.
inline std::vector<std::string> problems_of(const std::string& yaml, const std::string& base_dir = corpus_dir().str()) {
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
inline Message split(const std::string& text) {
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
inline Message only_problem(const std::string& yaml, const std::string& base_dir = corpus_dir().str()) {
  const auto problems = problems_of(yaml, base_dir);
  INFO("yaml:\n" << yaml);
  REQUIRE(problems.size() == 1);
  return split(problems[0]);
}

/// Checks every field except the hint.
inline void check(const Message& m, int line, const std::string& path, const std::optional<std::string>& value,
           const std::string& rule) {
  CHECK(m.file == "job.yaml");
  CHECK(m.line == line);
  CHECK(m.path == path);
  CHECK(m.value.value_or("<no value>") == value.value_or("<no value>"));
  CHECK(m.rule == rule);
}

/// `section:\n  key: value\n` for a dotted `section.key`: the key sits on line 2.
inline std::string one_key(const std::string& dotted, const std::string& value) {
  const auto dot = dotted.find('.');
  return dotted.substr(0, dot) + ":\n  " + dotted.substr(dot + 1) + ": " + value + "\n";
}

/// parse_job_spec's JobSpec for `yaml` (source name `job.yaml`); fails the test if it reports a problem.
inline JobSpec parse_ok(const std::string& yaml, const std::string& base_dir = corpus_dir().str()) {
  INFO("yaml:\n" << yaml);
  try {
    return parse_job_spec(yaml, "job.yaml", base_dir);
  } catch (const ppctl::ConfigError& e) {
    FAIL("unexpected ConfigError:\n" << e.what());
  }
  return {};
}

/// The rule for a schedule outside the allowed set.
inline const std::string kSchedules = "must be one of 1f1b, gpipe, interleaved-1f1b, zb-h1, zbv, zb-auto, custom";

}  // namespace ppctl::config::load_test
