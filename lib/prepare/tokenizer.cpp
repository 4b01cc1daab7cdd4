// Byte and SentencePiece tokenizers.
#include "prepare/tokenizer.hpp"

#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include <filesystem>

#include "core/echo.hpp"
#include "prepare/document_reader.hpp"
#include "prepare/prepare_error.hpp"

namespace ppctl::prepare {
namespace {

class BytesTokenizer final : public Tokenizer {
 public:
  std::string kind() const override { return "bytes"; }
  std::string model_path() const override { return ""; }
  int64_t vocab_size() const override { return 256; }
  std::optional<int64_t> eos_id() const override { return std::nullopt; }
  void encode(std::string_view text, std::vector<int32_t>& ids) const override {
    ids.reserve(ids.size() + text.size());
    for (const char c : text) ids.push_back(static_cast<uint8_t>(c));
  }
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::string path, std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
      : path_(std::move(path)), sp_(std::move(sp)) {}
  std::string kind() const override { return "sentencepiece"; }
  std::string model_path() const override { return path_; }
  int64_t vocab_size() const override { return sp_->GetPieceSize(); }
  std::optional<int64_t> eos_id() const override {
    const int id = sp_->eos_id();
    return id >= 0 ? std::optional<int64_t>(id) : std::nullopt;
  }
  void encode(std::string_view text, std::vector<int32_t>& ids) const override {
    std::vector<int> out;
    const auto status = sp_->Encode(text, &out);
    if (!status.ok()) {
      throw Error(fmt::format("SentencePiece could not encode a document with {}: {}", path_,
                              status.ToString()));
    }
    ids.insert(ids.end(), out.begin(), out.end());
  }

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_bytes_tokenizer() { return std::make_unique<BytesTokenizer>(); }

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    // A model folder (Llama 2's, as downloaded) holds its SentencePiece model as tokenizer.model.
    const fs::path inside = fs::path(path) / "tokenizer.model";
    const bool folder_with_model = fs::is_directory(path, ec) && fs::is_regular_file(inside, ec);
    throw PrepareError(fmt::format(
        "--model {}: {} (fix: {})", core::echo_label(path),
        folder_with_model ? "a folder" : fs::exists(path, ec) ? "not a regular file" : "no such file",
        folder_with_model ? "name the model file in it: --model " + core::echo_label(inside.string())
                          : std::string("name a SentencePiece .model file, e.g. one spm_train wrote")));
  }
  // Read it ourselves first so an unreadable file gets the system's reason, not the library's.
  const std::string bytes = read_input_file(path, "--model");
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = sp->LoadFromSerializedProto(bytes);
  if (!status.ok() || sp->GetPieceSize() <= 0) {
    throw PrepareError(fmt::format(
        "--model {}: not a valid SentencePiece model ({}) (fix: name the .model file spm_train "
        "wrote, not the .vocab)",
        core::echo_label(path), core::escape_control(status.ok() ? "no pieces" : status.ToString())));
  }
  return std::make_unique<SentencePieceTokenizer>(fs::absolute(path).lexically_normal().string(),
                                                  std::move(sp));
}

}  // namespace ppctl::prepare
