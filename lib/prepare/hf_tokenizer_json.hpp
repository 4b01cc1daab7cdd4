// Reading a Hugging Face `tokenizer.json` (the file the `tokenizers` library saves) into the plain
// description of a byte-level BPE tokenizer that prepare/byte_level_bpe.hpp runs. Only what GPT-2,
// Llama 3 and Qwen2/3 style files use is accepted; every other model, normalizer, pre-tokenizer or
// post-processor is refused naming the file and the field. Debian packages no C++ port of Hugging
// Face tokenizers: this is a small one, tested against `tokenizers` (tests/prepare/test_hf_bpe.py).
// No torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ppctl::prepare {

/// One entry of tokenizer.json's `added_tokens` (tokenizers' AddedToken). Special and added tokens
/// are found in the text before pre-tokenization: those with `normalized` false in the raw text,
/// the others in the normalized text.
struct HfAddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;      ///< the match takes the white space on its left
  bool rstrip = false;      ///< the match takes the white space on its right
  bool normalized = false;  ///< matched after the normalizer (true) or in the raw text (false)
};

/// How a Split pre-tokenizer treats the pieces its pattern matches (tokenizers'
/// SplitDelimiterBehavior, tokenizers/src/tokenizer/normalizer.rs).
enum class HfSplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

/// One pre-tokenizer step: a Split (a regex or a literal) or the final ByteLevel.
struct HfPreTokenizerStep {
  enum class Kind { kSplit, kByteLevel } kind = Kind::kSplit;
  std::string field;                  ///< where it is in the file, e.g. "pre_tokenizer.pretokenizers[0]"
  std::string pattern;                ///< Split: a PCRE2 regex, or a literal when !pattern_is_regex
  bool pattern_is_regex = true;
  HfSplitBehavior behavior = HfSplitBehavior::kIsolated;
  bool invert = false;                ///< Split: the pieces between matches are the matches
  bool add_prefix_space = false;      ///< ByteLevel: a space before each piece that lacks one
  bool use_regex = true;              ///< ByteLevel: split with GPT-2's pattern first
};

/// The BPE model: vocabulary (token in the byte-to-unicode alphabet, id), merges in rank order.
struct HfBpeModel {
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  ///< rank = index
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool ignore_merges = false;  ///< a word that is itself in the vocabulary is one token (Llama 3)
};

/// A byte-level BPE tokenizer.json, validated as far as the file alone allows (merges against the
/// vocabulary and the regexes are checked where they are built: prepare/byte_level_bpe.hpp).
struct HfTokenizerSpec {
  std::string path;              ///< the file, for error messages
  bool nfc = false;              ///< the normalizer is NFC (Qwen2/3); otherwise there is none
  std::vector<HfAddedToken> added_tokens;
  std::vector<HfPreTokenizerStep> pre_tokenizer;  ///< Split steps, then exactly one ByteLevel last
  HfBpeModel model;
  std::vector<int32_t> prefix_ids;  ///< ids the post-processor puts before the text (a BOS)
  std::vector<int32_t> suffix_ids;  ///< and after it (an EOS)
};

/// Parses the text of a tokenizer.json (`path` names it in errors). Throws prepare::PrepareError
/// "PATH: FIELD: PROBLEM (fix: ...)" when it is not JSON, or its model is not BPE (WordPiece,
/// Unigram, WordLevel), or a normalizer, pre-tokenizer or post-processor is one this reader does not
/// implement, or BPE options change its output in ways it does not implement (dropout,
/// continuing_subword_prefix, end_of_word_suffix, byte_fallback), or an added token lacks an id or
/// content. Values from the file are echoed through core::echo_value.
HfTokenizerSpec parse_hf_tokenizer_json(std::string_view text, const std::string& path);

/// Reads `path` (a tokenizer.json, or a folder holding one) and parses it. Throws
/// prepare::PrepareError naming `path` when it is missing, unreadable or refused as above.
HfTokenizerSpec read_hf_tokenizer_json(const std::string& path);

/// The end-of-sequence id of the tokenizer at `path`: the `eos_token` of the tokenizer_config.json
/// beside it (the file transformers saves) when that names a token of `spec`, else the last id the
/// post-processor appends, else nullopt.
std::optional<int32_t> hf_eos_id(const HfTokenizerSpec& spec);

}  // namespace ppctl::prepare
