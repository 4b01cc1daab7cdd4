// data.format megatron: a Megatron-LM indexed dataset PREFIX.bin + PREFIX.idx (megatron_format.hpp).
#pragma once

#include <string>

#include "data/mapped_file.hpp"
#include "data/megatron_format.hpp"
#include "data/token_source.hpp"

namespace ppctl::data {

/// The sequences of PREFIX.bin back to back in index order, which for a dataset written by
/// Megatron's IndexedDatasetBuilder (or `ppctl data prepare`) is the .bin itself. Memory-mapped;
/// only the index header and its last entries are touched on open.
class MegatronSource : public TokenSource {
 public:
  /// Maps PREFIX.idx and PREFIX.bin. Throws ppctl::Error naming the file when one is missing or
  /// unreadable, the .idx header is bad (magic, version, dtype code), the dtype is not an integer,
  /// the .idx is shorter than its counts imply, or the .bin size differs from the size the last
  /// sequence's pointer and length imply.
  explicit MegatronSource(const std::string& prefix);
  int64_t num_tokens() const override { return bin_.size() / layout_.bytes; }
  /// Documents: the index's document count minus the leading 0.
  int64_t num_documents() const override;
  void read(int64_t start, int64_t count, int64_t* out) const override;
  std::string describe() const override;

  /// The full O(sequences) check of the index against the .bin (launcher side, once): document
  /// indices start at 0, never decrease and end at the sequence count; every sequence pointer is the
  /// running sum of the lengths x the dtype size (no gap or overlap); the sum is the .bin size.
  /// Throws ppctl::Error naming PREFIX.idx and the first entry that is wrong.
  void check_index() const;

  const megatron::IndexHeader& header() const { return header_; }
  /// Sequence (document) lengths and first token, for `ppctl data inspect` and tests.
  int64_t sequence_length(int64_t sequence) const;
  int64_t sequence_start(int64_t sequence) const;
  /// Entry k of the document index (0 <= k < header().document_count).
  int64_t document_index(int64_t k) const;

 private:
  std::string prefix_;
  MappedFile idx_;
  MappedFile bin_;
  megatron::IndexHeader header_;
  IdLayout layout_;
};

}  // namespace ppctl::data
