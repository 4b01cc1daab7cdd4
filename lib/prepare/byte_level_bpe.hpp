// The byte-level BPE model of a Hugging Face tokenizer.json: the byte-to-unicode alphabet (GPT-2,
// Radford et al. 2019, its encoder.py bytes_to_unicode) and merges by rank (Sennrich et al. 2016, as
// tokenizers/src/models/bpe/word.rs merge_all applies them), with a cache of words already seen as
// tokenizers keeps. Part of ppctl's small port of Hugging Face tokenizers (Debian packages none),
// tested against `tokenizers` in tests/prepare/test_hf_bpe.py. No torch.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "prepare/hf_tokenizer_json.hpp"

namespace ppctl::prepare {

/// The byte-to-unicode alphabet: for each byte value, the UTF-8 of the character that stands for it
/// in the vocabulary ('!'..'~', '¡'..'¬', '®'..'ÿ' stand for themselves; the other 68 bytes, the
/// space among them, for U+0100 onwards in order: ' ' is 'Ġ', '\n' is 'Ċ').
const std::array<std::string, 256>& byte_to_unicode();

/// The bytes a vocabulary token stands for, or false when it holds a character outside the alphabet
/// (such a token can only be an added token, never the result of merges).
bool unicode_to_bytes(std::string_view token, std::string& bytes);

/// A BPE model over bytes: the ids of a word (one pre-token's bytes) by merges applied lowest rank
/// first, the leftmost of equal rank first. Not thread-safe (the word cache).
class ByteLevelBpe {
 public:
  /// Builds the merge table. Throws prepare::PrepareError naming `spec.path` and "model.merges[i]"
  /// when a merge names a token, or makes one, that is not in model.vocab (as tokenizers refuses),
  /// and "model.unk_token" when that token is not in the vocabulary.
  explicit ByteLevelBpe(const HfTokenizerSpec& spec);

  /// Appends the ids of `word` (raw bytes, not empty) to `ids`. A byte whose character is not in the
  /// vocabulary becomes unk_token (fused when fuse_unk), or is dropped when there is none, as tokenizers does.
  void encode_word(std::string_view word, std::vector<int32_t>& ids);

  /// The largest id of the vocabulary.
  int32_t max_id() const { return max_id_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool gone;
  };
  void merge(std::vector<int32_t>& out);
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  std::array<int32_t, 256> byte_ids_{};                  ///< id of each byte's character, -1 if none
  std::unordered_map<uint64_t, Merge> merges_;           ///< (left id, right id) -> rank, merged id
  std::unordered_map<std::string, int32_t> vocab_bytes_;  ///< ignore_merges: word bytes -> id
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  int32_t max_id_ = 0;
  std::unordered_map<std::string, std::vector<int32_t>> cache_;
  std::string key_;               ///< the cache key, reused
  std::vector<Symbol> symbols_;   ///< scratch of merge()
};

}  // namespace ppctl::prepare
