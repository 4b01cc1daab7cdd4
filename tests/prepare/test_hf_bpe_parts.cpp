// Unit tests of the parts of the tokenizer.json tokenizer that its Python test against `tokenizers`
// cannot isolate: the UTF-8 check PCRE2's unchecked matching relies on, the byte-to-unicode alphabet,
// merge order by rank, and \s as Oniguruma's set.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <string>
#include <vector>

#include "prepare/byte_level_bpe.hpp"
#include "prepare/hf_bpe_tokenizer.hpp"
#include "prepare/pre_tokenizer.hpp"
#include "prepare/prepare_error.hpp"

using ppctl::prepare::invalid_utf8_at;
using Catch::Matchers::ContainsSubstring;

TEST_CASE("invalid_utf8_at accepts valid UTF-8 and finds every kind of invalid byte") {
  CHECK(invalid_utf8_at("plain, Grüße, 日本語, 🙂, \xf4\x8f\xbf\xbf (U+10FFFF)") == std::string::npos);
  CHECK(invalid_utf8_at("") == std::string::npos);
  CHECK(invalid_utf8_at("ab\x80") == 2);                 // a continuation byte alone
  CHECK(invalid_utf8_at("a\xc0\x80") == 1);              // overlong NUL (C0, C1 never lead)
  CHECK(invalid_utf8_at("a\xe0\x80\x80") == 1);          // overlong three bytes
  CHECK(invalid_utf8_at("a\xf0\x80\x80\x80") == 1);      // overlong four bytes
  CHECK(invalid_utf8_at("a\xed\xa0\x80") == 1);          // a surrogate, U+D800
  CHECK(invalid_utf8_at("a\xf4\x90\x80\x80") == 1);      // past U+10FFFF
  CHECK(invalid_utf8_at("a\xf5\x80\x80\x80") == 1);      // F5-FF never lead
  CHECK(invalid_utf8_at("caf\xc3") == 3);                // cut short at the end
  CHECK(invalid_utf8_at("caf\xc3\x28") == 3);            // a lead byte without its continuation
}

TEST_CASE("byte_to_unicode is GPT-2's alphabet and unicode_to_bytes inverts it") {
  const auto& alphabet = ppctl::prepare::byte_to_unicode();
  CHECK(alphabet[' '] == "\xc4\xa0");   // 'Ġ' (U+0120)
  CHECK(alphabet['\n'] == "\xc4\x8a");  // 'Ċ' (U+010A)
  CHECK(alphabet['!'] == "!");
  CHECK(alphabet[0xff] == "\xc3\xbf");  // 'ÿ' stands for itself
  CHECK(alphabet[0] == "\xc4\x80");     // the first byte outside the printable ranges: U+0100
  std::string bytes;
  for (int b = 0; b < 256; ++b) {
    REQUIRE(ppctl::prepare::unicode_to_bytes(alphabet[b], bytes));
    CHECK(bytes == std::string(1, static_cast<char>(b)));
  }
  CHECK_FALSE(ppctl::prepare::unicode_to_bytes("a b", bytes));  // a plain space is not in the alphabet
}

namespace {

ppctl::prepare::HfTokenizerSpec spec_with(std::vector<std::pair<std::string, std::string>> merges) {
  ppctl::prepare::HfTokenizerSpec spec;
  spec.path = "test/tokenizer.json";
  spec.model.vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"aa", 5}, {"aaaa", 6}};
  spec.model.merges = std::move(merges);
  return spec;
}

std::vector<int32_t> ids_of(ppctl::prepare::ByteLevelBpe& bpe, const std::string& word) {
  std::vector<int32_t> ids;
  bpe.encode_word(word, ids);
  return ids;
}

}  // namespace

TEST_CASE("ByteLevelBpe merges the lowest rank first, the leftmost of a rank first") {
  ppctl::prepare::ByteLevelBpe low_bc(spec_with({{"b", "c"}, {"a", "b"}}));
  CHECK(ids_of(low_bc, "abc") == std::vector<int32_t>{0, 4});
  ppctl::prepare::ByteLevelBpe low_ab(spec_with({{"a", "b"}, {"b", "c"}}));
  CHECK(ids_of(low_ab, "abc") == std::vector<int32_t>{3, 2});
  ppctl::prepare::ByteLevelBpe pairs(spec_with({{"a", "a"}}));
  CHECK(ids_of(pairs, "aaa") == std::vector<int32_t>{5, 0});
  CHECK(ids_of(pairs, "aaa") == std::vector<int32_t>{5, 0});  // from the cache
  ppctl::prepare::ByteLevelBpe chain(spec_with({{"a", "a"}, {"aa", "aa"}}));
  CHECK(ids_of(chain, "aaaaa") == std::vector<int32_t>{6, 0});
  CHECK(ids_of(chain, "axa") == std::vector<int32_t>{5});  // 'x' is not in the vocabulary: dropped, as tokenizers does
}

TEST_CASE("ByteLevelBpe refuses a merge naming a token outside the vocabulary, naming file and merge") {
  try {
    ppctl::prepare::ByteLevelBpe bpe(spec_with({{"a", "b"}, {"c", "zz"}}));
    FAIL("no error");
  } catch (const ppctl::prepare::PrepareError& e) {
    CHECK_THAT(e.what(), ContainsSubstring("test/tokenizer.json: model.merges[1]") && ContainsSubstring("zz"));
  }
}

TEST_CASE("Split patterns read \\s as Oniguruma does: U+180E is not a space") {
  const ppctl::prepare::Pcre2Pattern spaces(R"(\s+|[^\s]+)", false, "f", "pattern");
  std::vector<std::pair<size_t, size_t>> matches;
  spaces.find_all("a\xe1\xa0\x8e" "b", matches);  // a U+180E b: one non-space run
  CHECK(matches == std::vector<std::pair<size_t, size_t>>{{0, 5}});
  spaces.find_all("a\xe3\x80\x80" "b", matches);  // a U+3000 b: a space between
  CHECK(matches == std::vector<std::pair<size_t, size_t>>{{0, 1}, {1, 4}, {4, 5}});
  const ppctl::prepare::Pcre2Pattern literal("a.b", true, "f", "pattern");
  literal.find_all("axb a.b", matches);
  CHECK(matches == std::vector<std::pair<size_t, size_t>>{{4, 7}});
}
