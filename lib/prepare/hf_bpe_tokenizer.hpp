// The byte-level BPE tokenizer of a Hugging Face tokenizer.json, as `ppctl data prepare --tokenizer
// PATH` runs it: added and special tokens, the NFC normalizer, Split and ByteLevel pre-tokenizers, the
// BPE model, the post-processor's BOS/EOS; the steps of tokenizers' Tokenizer::encode
// (tokenizers/src/tokenizer/mod.rs). Debian packages no C++ port of Hugging Face tokenizers: this is a
// small one for byte-level BPE (GPT-2, Llama 3, Qwen2/3 style), tested against `tokenizers` 0.23 in
// tests/prepare/test_hf_bpe.py. No torch.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prepare/added_tokens.hpp"
#include "prepare/byte_level_bpe.hpp"
#include "prepare/hf_tokenizer_json.hpp"
#include "prepare/pre_tokenizer.hpp"
#include "prepare/tokenizer.hpp"

namespace ppctl::prepare {

/// The offset of the first byte of `text` that is not valid UTF-8 (RFC 3629: no overlong forms, no
/// surrogates, nothing past U+10FFFF), or std::string_view::npos when it is all valid.
size_t invalid_utf8_at(std::string_view text);

/// A tokenizer.json tokenizer. encode() equals tokenizers' `Tokenizer.encode(text).ids` (special tokens
/// added by the post-processor; truncation and padding, which data preparation never wants, are not
/// applied). Not thread-safe (the word cache).
class HfBpeTokenizer final : public Tokenizer {
 public:
  /// Builds it from a parsed file. Throws prepare::PrepareError naming the file and field for merges
  /// naming unknown tokens and Split patterns that PCRE2 does not compile.
  explicit HfBpeTokenizer(HfTokenizerSpec spec);

  std::string kind() const override { return "hf-bpe"; }
  std::string model_path() const override { return path_; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int64_t> eos_id() const override { return eos_id_; }
  /// Throws prepare::PrepareError when `text` is not valid UTF-8 (naming the offset).
  void encode(std::string_view text, std::vector<int32_t>& ids) const override;

 private:
  /// Normalizes (NFC when the file asks), finds the normalized added tokens, pre-tokenizes and runs BPE.
  void encode_text(std::string_view text, std::vector<int32_t>& ids) const;
  void encode_pre_tokenized(std::string_view text, std::vector<int32_t>& ids) const;

  std::string path_;
  int64_t vocab_size_ = 0;
  std::optional<int64_t> eos_id_;
  bool nfc_ = false;
  AddedTokenMatcher raw_tokens_;
  AddedTokenMatcher normalized_tokens_;
  struct SplitStep {
    std::unique_ptr<Pcre2Pattern> pattern;
    HfSplitBehavior behavior;
    bool invert;
  };
  std::vector<SplitStep> splits_;
  HfPreTokenizerStep byte_level_;
  std::unique_ptr<Pcre2Pattern> gpt2_;  ///< when byte_level_.use_regex
  std::unique_ptr<ByteLevelBpe> bpe_;   ///< mutable through the pointer: its word cache
  std::vector<int32_t> prefix_ids_;
  std::vector<int32_t> suffix_ids_;
};

/// Reads the tokenizer.json at `path` (or in the folder `path`) and builds its tokenizer. Throws
/// prepare::PrepareError naming the file and field for everything read_hf_tokenizer_json and the
/// constructor refuse.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path);

}  // namespace ppctl::prepare
