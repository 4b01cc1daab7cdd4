// Tests for config/load's problem messages as printed: a long value is cut, and escape sequences in a spec's
// values and keys are escaped.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "core/echo.hpp"
#include "support/load_helpers.hpp"

using Catch::Matchers::ContainsSubstring;
using namespace ppctl::config;
using namespace ppctl::config::load_test;

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
