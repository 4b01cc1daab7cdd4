// Tests for config/schema: the table's form (docs, ranges, spellings and defaults each row needs) and the ranges
// it gives command-line options. The docs' field tables are generated from it (test_reference.cpp, docs.reference).
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "config/schema.hpp"

using namespace ppctl::config;
using namespace ppctl::config::detail;

namespace {

/// The schema as the loader makes it, for a fresh JobSpec (whose values are the defaults). Only the table's
/// columns are read here, never its readers.
const std::vector<Section>& the_schema() {
  static JobSpec spec;
  static DataEntries entries;
  static const std::vector<Section> sections = schema(spec, entries);
  return sections;
}

}  // namespace

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
