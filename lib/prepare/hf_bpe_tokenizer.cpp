// A tokenizer.json tokenizer: added tokens, NFC, pre-tokenizers, BPE, post-processor, in tokenizers' order.
#include "prepare/hf_bpe_tokenizer.hpp"

#include <fmt/format.h>
#include <uninorm.h>

#include <algorithm>
#include <cstdlib>

#include "prepare/prepare_error.hpp"

namespace ppctl::prepare {
namespace {

std::vector<HfAddedToken> tokens_where(const std::vector<HfAddedToken>& tokens, bool normalized) {
  std::vector<HfAddedToken> out;
  for (const auto& t : tokens) {
    if (t.normalized == normalized) out.push_back(t);
  }
  return out;
}

/// `text` in Normalization Form C (libunistring's u8_normalize). Text whose characters all lie below
/// U+0300 (no UTF-8 byte 0xCC or above) is NFC already and comes back as it is, without a copy.
std::string_view nfc(std::string_view text, std::string& storage) {
  if (std::none_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0xCC; })) {
    return text;
  }
  size_t length = 0;
  uint8_t* out = u8_normalize(UNINORM_NFC, reinterpret_cast<const uint8_t*>(text.data()), text.size(), nullptr, &length);
  if (out == nullptr) throw Error("libunistring could not normalize a document to NFC (out of memory?)");
  storage.assign(reinterpret_cast<const char*>(out), length);
  std::free(out);
  return storage;
}

/// The ids of `pieces`: an added token's id, or what `encode_text` appends for the text between.
template <typename EncodeText>
void encode_pieces(const std::vector<TextPiece>& pieces, std::vector<int32_t>& ids, EncodeText encode_text) {
  for (const TextPiece& p : pieces) {
    if (p.id >= 0) {
      ids.push_back(p.id);
    } else {
      encode_text(p.text);
    }
  }
}

}  // namespace

size_t invalid_utf8_at(std::string_view s) {
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    const size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len == 0 || i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return i;
    }
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) {
      return i;  // overlong, a surrogate, or past U+10FFFF
    }
    i += len;
  }
  return std::string_view::npos;
}

HfBpeTokenizer::HfBpeTokenizer(HfTokenizerSpec spec)
    : path_(spec.path),
      nfc_(spec.nfc),
      raw_tokens_(tokens_where(spec.added_tokens, false)),
      normalized_tokens_(tokens_where(spec.added_tokens, true)),
      byte_level_(spec.pre_tokenizer.back()),
      prefix_ids_(spec.prefix_ids),
      suffix_ids_(spec.suffix_ids) {
  for (size_t i = 0; i + 1 < spec.pre_tokenizer.size(); ++i) {
    const auto& step = spec.pre_tokenizer[i];
    splits_.push_back({std::make_unique<Pcre2Pattern>(step.pattern, !step.pattern_is_regex, spec.path,
                                                      step.field + ".pattern"),
                       step.behavior, step.invert});
  }
  if (byte_level_.use_regex) gpt2_ = std::make_unique<Pcre2Pattern>(kGpt2Pattern, false, spec.path, byte_level_.field);
  bpe_ = std::make_unique<ByteLevelBpe>(spec);
  int64_t max_id = bpe_->max_id();
  for (const auto& t : spec.added_tokens) max_id = std::max<int64_t>(max_id, t.id);
  for (const int32_t id : prefix_ids_) max_id = std::max<int64_t>(max_id, id);
  for (const int32_t id : suffix_ids_) max_id = std::max<int64_t>(max_id, id);
  vocab_size_ = max_id + 1;
  if (const auto eos = hf_eos_id(spec)) eos_id_ = *eos;
}

void HfBpeTokenizer::encode(std::string_view text, std::vector<int32_t>& ids) const {
  if (const size_t bad = invalid_utf8_at(text); bad != std::string_view::npos) {
    throw PrepareError(fmt::format("the text is not valid UTF-8 at byte {} (a tokenizer.json tokenizer reads "
                                   "Unicode text; fix: convert the input to UTF-8, e.g. with iconv)",
                                   bad));
  }
  ids.insert(ids.end(), prefix_ids_.begin(), prefix_ids_.end());
  std::vector<TextPiece> pieces;
  raw_tokens_.split(text, pieces);
  encode_pieces(pieces, ids, [&](std::string_view piece) { encode_text(piece, ids); });
  ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
}

void HfBpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>& ids) const {
  std::string storage;
  const std::string_view normalized = nfc_ ? nfc(text, storage) : text;
  if (normalized_tokens_.empty()) return encode_pre_tokenized(normalized, ids);
  std::vector<TextPiece> pieces;
  normalized_tokens_.split(normalized, pieces);
  encode_pieces(pieces, ids, [&](std::string_view piece) { encode_pre_tokenized(piece, ids); });
}

void HfBpeTokenizer::encode_pre_tokenized(std::string_view text, std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  std::vector<std::string_view> pieces{text};
  std::vector<std::string_view> scratch;
  for (const SplitStep& step : splits_) split_pieces(*step.pattern, step.behavior, step.invert, pieces, scratch);
  std::vector<std::string_view> words;
  std::string prefixed;
  for (const std::string_view piece : pieces) {
    // ByteLevel: a space before each piece that lacks one (add_prefix_space), then GPT-2's split.
    std::string_view view = piece;
    if (byte_level_.add_prefix_space && (piece.empty() || piece[0] != ' ')) {
      prefixed.assign(" ");
      prefixed.append(piece);
      view = prefixed;
    }
    words.assign(1, view);
    if (gpt2_) split_pieces(*gpt2_, HfSplitBehavior::kIsolated, false, words, scratch);
    for (const std::string_view word : words) {
      if (!word.empty()) bpe_->encode_word(word, ids);
    }
  }
}

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path) {
  return std::make_unique<HfBpeTokenizer>(read_hf_tokenizer_json(path));
}

}  // namespace ppctl::prepare
