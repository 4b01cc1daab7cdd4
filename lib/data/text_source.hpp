// data.format text: the bytes of text files, concatenated in order, one token per byte.
#pragma once

#include <string>
#include <vector>

#include "data/mapped_file.hpp"
#include "data/token_source.hpp"

namespace ppctl::data {

/// The files' bytes back to back (vocabulary 256); each file is one document. Memory-mapped.
class TextSource : public TokenSource {
 public:
  /// Maps every file. Throws ppctl::Error naming a file that cannot be read.
  explicit TextSource(const std::vector<std::string>& files);
  int64_t num_tokens() const override { return total_; }
  int64_t num_documents() const override { return static_cast<int64_t>(files_.size()); }
  void read(int64_t start, int64_t count, int64_t* out) const override;
  std::string describe() const override;

 private:
  std::vector<MappedFile> files_;
  std::vector<int64_t> starts_;  ///< stream offset of each file's first byte
  int64_t total_ = 0;
};

}  // namespace ppctl::data
