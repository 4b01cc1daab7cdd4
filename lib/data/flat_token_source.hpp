// data.format tokens: one flat file of little-endian token ids (nanoGPT's train.bin).
#pragma once

#include <string>

#include "data/mapped_file.hpp"
#include "data/token_source.hpp"

namespace ppctl::data {

/// A file of num_tokens() ids of data.dtype, no header; one document. Memory-mapped.
class FlatTokenSource : public TokenSource {
 public:
  /// Maps `path`. Throws ppctl::Error naming the file when it cannot be read or its size is not a
  /// multiple of the dtype's size (the fix names data.dtype).
  FlatTokenSource(const std::string& path, config::TokenDType dtype);
  int64_t num_tokens() const override { return file_.size() / layout_.bytes; }
  int64_t num_documents() const override { return 1; }
  void read(int64_t start, int64_t count, int64_t* out) const override;
  std::string describe() const override;

 private:
  MappedFile file_;
  config::TokenDType dtype_;
  IdLayout layout_;
};

}  // namespace ppctl::data
