// The Split pre-tokenizer of a Hugging Face tokenizer.json: its regex run with PCRE2 (Debian's
// libpcre2, in UTF mode with Unicode properties, so \p{L} and \p{N} mean what they mean to tokenizers'
// Oniguruma; \s and \S are spelled out as Oniguruma's set, which lacks U+180E), and the five ways of keeping what it matches (tokenizers/src/tokenizer/
// normalizer.rs, NormalizedString::split). Part of ppctl's small port of Hugging Face tokenizers
// (Debian packages none), tested against `tokenizers` in tests/prepare/test_hf_bpe.py. No torch.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "prepare/hf_tokenizer_json.hpp"

namespace ppctl::prepare {

/// GPT-2's pre-tokenization pattern, the one ByteLevel uses when its use_regex is true.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// A compiled PCRE2 pattern (PCRE2_UTF | PCRE2_UCP; JIT-compiled where the library can). Not
/// thread-safe (it owns its match data).
class Pcre2Pattern {
 public:
  /// Compiles `pattern` (a literal when `literal`; else with \s and \S as Oniguruma's). Throws prepare::PrepareError naming `file`, `field`,
  /// PCRE2's message and the offset when it does not compile.
  Pcre2Pattern(const std::string& pattern, bool literal, const std::string& file, const std::string& field);
  ~Pcre2Pattern();
  Pcre2Pattern(const Pcre2Pattern&) = delete;
  Pcre2Pattern& operator=(const Pcre2Pattern&) = delete;

  /// The non-overlapping matches in `text` (valid UTF-8: not checked again), as byte ranges [start,
  /// end), left to right; after an empty match the search goes on one character further.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Splits each piece of `pieces` by `pattern` with `behavior` (`invert`: what lies between the
/// matches is treated as the matches), dropping empty pieces, as tokenizers' Split pre-tokenizer.
/// `scratch` is reused between calls.
void split_pieces(const Pcre2Pattern& pattern, HfSplitBehavior behavior, bool invert,
                  std::vector<std::string_view>& pieces, std::vector<std::string_view>& scratch);

}  // namespace ppctl::prepare
