// Tokenizers of `ppctl data prepare`: text to token ids, as bytes (vocabulary 256), with a
// SentencePiece model (Kudo & Richardson 2018; the C++ library libsentencepiece), or with a Hugging
// Face tokenizer.json (prepare/hf_bpe_tokenizer.hpp). Workers never
// tokenize: they read the ids written by prepare. No torch.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ppctl::prepare {

/// Turns the text of one document into token ids. Not for two threads at once (the tokenizer.json one
/// caches words).
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// "bytes", "sentencepiece" or "hf-bpe" (the `tokenizer` field of the dataset's tokenizer.json sidecar).
  virtual std::string kind() const = 0;
  /// The absolute path of the model file, or "" when there is none (bytes).
  virtual std::string model_path() const = 0;
  /// Number of ids the tokenizer can produce: every id is in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  /// The model's end-of-sequence id, or nullopt when it has none (bytes; a SentencePiece model
  /// trained with --eos_id=-1).
  virtual std::optional<int64_t> eos_id() const = 0;
  /// Appends the ids of `text` (UTF-8 for SentencePiece; any bytes for bytes) to `ids`.
  /// Throws ppctl::Error when the library reports a failure.
  virtual void encode(std::string_view text, std::vector<int32_t>& ids) const = 0;
};

/// The byte tokenizer: id = byte value (0..255), vocabulary 256, no end-of-sequence id; the same
/// ids as data.format `text` and as Python's `list(text.encode())`.
std::unique_ptr<Tokenizer> make_bytes_tokenizer();

/// Loads a SentencePiece model (`.model`, a serialized ModelProto as spm_train writes it).
/// Encoding is sentencepiece::SentencePieceProcessor::Encode, so the ids equal Python
/// sentencepiece's `encode(text)` for the same model. Throws prepare::PrepareError naming `path` when
/// the file is missing, unreadable, or not a valid model.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path);

}  // namespace ppctl::prepare
