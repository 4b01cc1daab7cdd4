// Tests for config/schema: the table of fields against configs/README.md's field tables (every field has a
// row in its section and every row names a field; ranges, defaults and spellings agree), and the table's form.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "config/schema.hpp"
#include "support/readme.hpp"

using namespace ppctl::config;
using namespace ppctl::config::detail;

namespace {

const std::string kReadme = std::string(PPCTL_SOURCE_DIR) + "/configs/README.md";

/// One row of a field table in configs/README.md.
struct Row {
  int table_line;  ///< line of the table's header, for messages
  std::string default_cell;
  std::string allowed;
};

/// configs/README.md's field tables (`| Key | Meaning | Unit | Default | Allowed |`): heading -> key -> row.
/// A key cell is written `key`, in backquotes.
std::map<std::string, std::map<std::string, Row>> readme_fields() {
  std::map<std::string, std::map<std::string, Row>> fields;
  for (const auto& table : ppctl::test::tables_with_header(kReadme, "| Key | Meaning | Unit | Default | Allowed |")) {
    INFO("the table on line " << table.line << " of configs/README.md, under '## " << table.heading << "'");
    CHECK(fields.count(table.heading) == 0);  // one table per section
    auto& rows = fields[table.heading];
    for (const auto& cells : table.rows) {
      REQUIRE(cells.size() == 5);
      const std::string& key = cells[0];
      INFO("row " << key);
      REQUIRE(key.size() > 2);
      CHECK(key.front() == '`');
      CHECK(key.back() == '`');
      CHECK(rows.count(key.substr(1, key.size() - 2)) == 0);
      rows[key.substr(1, key.size() - 2)] = {table.line, cells[3], cells[4]};
    }
  }
  return fields;
}

/// The schema as the loader makes it, for a fresh JobSpec (whose values are the defaults). Only the table's
/// columns are read here, never its readers.
const std::vector<Section>& the_schema() {
  static JobSpec spec;
  static DataEntries entries;
  static const std::vector<Section> sections = schema(spec, entries);
  return sections;
}

/// The text between backquotes in `text`, in order: "`gelu` or `gelu_tanh`" -> {gelu, gelu_tanh}.
std::vector<std::string> quoted_words(const std::string& text) {
  static const std::regex pattern("`([^`]*)`");
  std::vector<std::string> words;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern); it != std::sregex_iterator(); ++it) {
    words.push_back((*it)[1]);
  }
  return words;
}

/// A range as the README writes it after `lead` ("integer in", "number in", "each in"): `[1, 1024]`,
/// `(0, 10]`; the ends as written.
struct WrittenRange {
  bool lo_open;
  std::string lo;
  std::string hi;
  bool hi_open;
};

std::optional<WrittenRange> range_after(const std::string& text, const std::string& lead) {
  const std::regex pattern(lead + R"( ([\[(])([-0-9.e]+), ([-0-9.e]+)([\])]))");
  std::smatch m;
  if (!std::regex_search(text, m, pattern)) return std::nullopt;
  return WrittenRange{m[1] == "(", m[2], m[3], m[4] == ")"};
}

bool is_number(FieldType type) { return type == FieldType::Integer || type == FieldType::Real; }

}  // namespace

TEST_CASE("every schema field has a row in configs/README.md, and every row names a field", "[config][schema][docs]") {
  const auto readme = readme_fields();
  REQUIRE(!readme.empty());
  for (const auto& section : the_schema()) {
    INFO("section " << section.name);
    REQUIRE(readme.count(section.name) == 1);  // a `## NAME` heading with a field table
    const auto& rows = readme.at(section.name);
    for (const auto& field : section.fields) {
      INFO("schema field " << section.name << "." << field.key << " needs a row in configs/README.md");
      CHECK(rows.count(field.key) == 1);
    }
  }
  for (const auto& [heading, rows] : readme) {
    const auto section = std::find_if(the_schema().begin(), the_schema().end(),
                                      [&](const Section& s) { return s.name == heading; });
    INFO("configs/README.md has a field table under '## " << heading << "'");
    REQUIRE(section != the_schema().end());
    for (const auto& [key, row] : rows) {
      INFO("the row " << key << " of the table on line " << row.table_line << " names no schema field");
      CHECK(section->field(key) != nullptr);
    }
  }
}

TEST_CASE("the ranges in configs/README.md are the schema's", "[config][schema][docs]") {
  const auto readme = readme_fields();
  for (const auto& section : the_schema()) {
    for (const auto& field : section.fields) {
      if (readme.count(section.name) == 0 || readme.at(section.name).count(field.key) == 0) continue;  // above
      const std::string& allowed = readme.at(section.name).at(field.key).allowed;
      INFO(section.name << "." << field.key << ": Allowed is '" << allowed << "'");
      if (field.ints) {
        const auto written =
            range_after(allowed, field.type == FieldType::Integers ? "each in" : "integer in");
        REQUIRE(written.has_value());
        CHECK(!written->lo_open);
        CHECK(!written->hi_open);
        CHECK(written->lo == std::to_string(field.ints->lo));
        CHECK(written->hi == std::to_string(field.ints->hi));
      }
      if (field.reals) {
        const auto written = range_after(allowed, field.type == FieldType::Reals ? "each in" : "number in");
        REQUIRE(written.has_value());
        CHECK(written->lo_open == field.reals->lo_open);
        CHECK(written->hi_open == field.reals->hi_open);
        CHECK(std::stod(written->lo) == field.reals->lo);
        CHECK(std::stod(written->hi) == field.reals->hi);
      }
    }
  }
}

TEST_CASE("the defaults and spellings in configs/README.md are the schema's", "[config][schema][docs]") {
  const auto readme = readme_fields();
  const std::regex one_value("`([^`]*)`( \\(.*\\))?");
  for (const auto& section : the_schema()) {
    for (const auto& field : section.fields) {
      if (readme.count(section.name) == 0 || readme.at(section.name).count(field.key) == 0) continue;
      const Row& row = readme.at(section.name).at(field.key);
      INFO(section.name << "." << field.key << ": Default is '" << row.default_cell << "', the schema's '"
                        << field.default_text << "'");
      std::smatch m;
      if (field.default_text.empty()) {
        // No value: "none (...)", or "**required** unless ...".
        CHECK((row.default_cell.rfind("none", 0) == 0 || row.default_cell.rfind("**required**", 0) == 0));
      } else if (std::regex_match(row.default_cell, m, one_value)) {
        if (is_number(field.type)) {
          CHECK(std::stod(m[1]) == std::stod(field.default_text));
        } else {
          CHECK(m[1] == field.default_text);
        }
      } else {
        // A default that depends on other fields ("`true` for gpt2, `false` for llama") names the schema's.
        const auto words = quoted_words(row.default_cell);
        CHECK(std::find(words.begin(), words.end(), field.default_text) != words.end());
      }
      if (!field.choices.empty()) {
        INFO("Allowed is '" << row.allowed << "'");
        CHECK(quoted_words(row.allowed.substr(0, row.allowed.find(';'))) == field.choices);
      }
    }
  }
}

TEST_CASE("every schema row has a one-line doc, and the range or spellings its type needs", "[config][schema]") {
  std::set<std::string> names;
  for (const auto& section : the_schema()) {
    CHECK(names.insert(section.name).second);
    std::set<std::string> keys;
    for (const auto& field : section.fields) {
      INFO(section.name << "." << field.key);
      CHECK(keys.insert(field.key).second);
      CHECK(!field.doc.empty());
      CHECK(field.doc.find('\n') == std::string::npos);
      CHECK(field.doc.size() <= 100);
      CHECK(static_cast<bool>(field.read));
      const bool integers = field.type == FieldType::Integer || field.type == FieldType::Integers;
      const bool reals = field.type == FieldType::Real || field.type == FieldType::Reals;
      const bool words = field.type == FieldType::Choice || field.type == FieldType::Boolean;
      CHECK(field.ints.has_value() == integers);
      CHECK(field.reals.has_value() == reals);
      CHECK(!field.choices.empty() == words);
      if (field.ints) {
        CHECK(field.ints->lo <= field.ints->hi);
        if (field.type == FieldType::Integer) {
          CHECK(field.ints->contains(std::stoll(field.default_text)));
        }
      }
      if (field.reals && field.type == FieldType::Real) CHECK(field.reals->contains(std::stod(field.default_text)));
      if (words) {
        CHECK(std::find(field.choices.begin(), field.choices.end(), field.default_text) != field.choices.end());
      }
    }
  }
}

TEST_CASE("integer_field_range gives a field's range from the schema, for the options that stand for it",
          "[config][schema]") {
  JobSpec spec;
  DataEntries entries;
  for (const Section& section : schema(spec, entries)) {
    for (const Field& field : section.fields) {
      const std::string path = section.name + "." + field.key;
      if (field.type != FieldType::Integer) {
        CHECK_THROWS_AS(integer_field_range(path), std::invalid_argument);
        continue;
      }
      const auto [lo, hi] = integer_field_range(path);
      CHECK(lo == field.ints->lo);
      CHECK(hi == field.ints->hi);
    }
  }
  CHECK(integer_field_range("train.steps") == std::pair<int64_t, int64_t>{1, 1'000'000'000});
  CHECK_THROWS_AS(integer_field_range("train.step"), std::invalid_argument);
  CHECK_THROWS_AS(integer_field_range("steps"), std::invalid_argument);
}
