// Finding a Hugging Face tokenizer's added and special tokens in a text before pre-tokenization, as
// tokenizers/src/tokenizer/added_vocabulary.rs does (leftmost-longest matches; lstrip and rstrip take
// the white space beside a match). Part of ppctl's small port of Hugging Face tokenizers (Debian
// packages none), tested against `tokenizers` in tests/prepare/test_hf_bpe.py. No torch.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "prepare/hf_tokenizer_json.hpp"

namespace ppctl::prepare {

/// A piece of a document: text still to tokenize (`id` -1) or an added token found in it.
struct TextPiece {
  std::string_view text;
  int32_t id = -1;
};

/// The added tokens of one matching pass (tokenizers runs two: tokens with `normalized` false on the
/// raw text, then the others on each normalized piece between them).
class AddedTokenMatcher {
 public:
  /// Matches `tokens` (contents are not empty; for equal contents the first is kept).
  explicit AddedTokenMatcher(std::vector<HfAddedToken> tokens);

  /// True when there is no token to find.
  bool empty() const { return tokens_.empty(); }

  /// Appends `text` to `out` cut at the tokens found: at each place the longest token that starts
  /// there, the leftmost place first; text pieces may be empty (skipped).
  void split(std::string_view text, std::vector<TextPiece>& out) const;

 private:
  std::vector<HfAddedToken> tokens_;                  ///< longest content first
  std::array<std::vector<uint32_t>, 256> by_first_{};  ///< indices of tokens_ by first byte
};

}  // namespace ppctl::prepare
