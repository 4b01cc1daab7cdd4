// Tests for core/echo: text from an input is shown with control characters and invalid UTF-8 escaped, valid
// UTF-8 kept, long values cut at a character boundary and labels kept whole.
#include <catch2/catch_test_macros.hpp>

#include <string>

#include "core/echo.hpp"
#include "support/shell_words.hpp"

using ppctl::core::echo_label;
using ppctl::core::echo_value;
using ppctl::core::escape_control;

namespace {

/// True when `text` holds no byte a terminal would act on: no C0 control, no DEL, no C1 control, and
/// valid UTF-8 throughout (checked by escaping it again: escape_control leaves such text unchanged but
/// for its backslashes).
bool terminal_safe(const std::string& text) {
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7F) return false;
  }
  std::string without_backslashes;
  for (const char c : text) {
    if (c != '\\') without_backslashes += c;
  }
  return escape_control(without_backslashes) == without_backslashes;
}

}  // namespace

TEST_CASE("escape_control writes every terminal-acting byte as an escape and keeps valid UTF-8") {
  CHECK(escape_control("\x1b]0;pwned\x07") == "\\x1b]0;pwned\\x07");  // an OSC title sequence
  CHECK(escape_control("\x1b[31mX") == "\\x1b[31mX");
  CHECK(escape_control("a\tb\nc\rd") == "a\\x09b\\x0ac\\x0dd");
  CHECK(escape_control(std::string("nul\0x", 5)) == "nul\\x00x");
  CHECK(escape_control("del\x7f") == "del\\x7f");
  CHECK(escape_control("back\\slash") == "back\\\\slash");  // so that a shown escape is never the input's own
  CHECK(escape_control("\xc2\x9b" "31m") == "\\u009b31m");   // C1 CSI, valid UTF-8 but an escape on some terminals
  // Valid UTF-8 stays: accents, CJK, Arabic, emoji.
  const std::string text = "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a \xf0\x9f\x98\x80";
  CHECK(escape_control(text) == text);
  // Invalid UTF-8 byte by byte: a stray continuation, a cut sequence, overlong forms, a surrogate, > U+10FFFF.
  CHECK(escape_control("\x80") == "\\x80");
  CHECK(escape_control("\xe4\xb8") == "\\xe4\\xb8");
  CHECK(escape_control("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(escape_control("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");
  CHECK(escape_control("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(escape_control("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");
  CHECK(escape_control("\xff") == "\\xff");
  // Every single byte value, alone and after valid text, comes out terminal-safe.
  for (int b = 0; b < 256; ++b) {
    INFO("byte " << b);
    CHECK(terminal_safe(escape_control(std::string(1, static_cast<char>(b)))));
    CHECK(terminal_safe(escape_control("x\xc3\xa9" + std::string(1, static_cast<char>(b)) + "\xe4\xb8\xad")));
  }
}

TEST_CASE("echo_value cuts after escaping nothing it should not; echo_label keeps a long path whole") {
  const std::string control = "\x1b" + std::string(200, 'a');
  const auto cut = echo_value(control);
  CHECK(cut.rfind("\\x1b", 0) == 0);
  CHECK(cut.find("... (201 bytes in all)") != std::string::npos);
  CHECK(terminal_safe(cut));
  const std::string path = "/data/" + std::string(300, 'p') + "/\x1b[2J/config.json";
  const auto label = echo_label(path);
  CHECK(label.find(std::string(300, 'p') + "/\\x1b[2J/config.json") != std::string::npos);
  CHECK(label.find("bytes in all") == std::string::npos);
  CHECK(echo_label(std::string(ppctl::core::kMaxLabelChars + 1, 'k')).find("bytes in all") != std::string::npos);
}

TEST_CASE("shell_word gives bash back every path as one word, plain ones unquoted") {
  using ppctl::core::shell_word;
  CHECK(shell_word("configs/example.yaml") == "configs/example.yaml");
  CHECK(shell_word("/scratch/run-1/job_v2.yaml") == "/scratch/run-1/job_v2.yaml");
  for (const std::string path : {"my jobs/job 1.yaml", "it's.yaml", "$(touch pwned).yaml", "a\"b`c`.yaml", "",
                                 "tab\there", "semi;colon&amp|pipe", "*glob?[x]", "~user/job.yaml", "new\nline",
                                 "'''", "back\\slash", "!history", "{a,b}.yaml", "$HOME/job.yaml"}) {
    INFO("[" << path << "] written as [" << shell_word(path) << "]");
    const auto words = ppctl::test::shell_words(shell_word(path) + " next");
    REQUIRE(words.size() == 2);
    CHECK(words[0] == path);
    CHECK(words[1] == "next");
  }
}
