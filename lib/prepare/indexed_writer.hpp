// Writes a Megatron-LM indexed dataset (PREFIX.bin + PREFIX.idx, layout in data/megatron_format.hpp)
// and its tokenizer sidecar, all or nothing: temporaries, fsync, then renames. No torch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/megatron_format.hpp"

namespace ppctl::prepare {

/// Appends documents, one sequence per document (as Megatron's tools/preprocess_data.py without
/// --split-sentences), to PREFIX.bin.tmp.PID; commit() writes the index and puts everything under the
/// final names. Until commit() nothing exists under PREFIX.bin / PREFIX.idx / PREFIX.tokenizer.json
/// that was not there before, and the destructor of an uncommitted writer removes its temporaries
/// (a failure or bad input leaves nothing behind).
class IndexedDatasetWriter {
 public:
  /// Creates the temporary .bin for ids stored as `dtype` (kUint16 or kInt32, the two dtypes
  /// Megatron's DType.optimal_dtype picks for tokens; kUint8 for loss masks). The folder of `prefix` must exist (the caller checks it
  /// and reports bad input). Throws ppctl::Error naming the file when it cannot be created.
  IndexedDatasetWriter(std::string prefix, data::megatron::DType dtype);
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;
  ~IndexedDatasetWriter();

  /// Appends one document of `ids` (may be empty: a sequence of length 0). Throws
  /// ppctl::InternalError when an id does not fit the dtype (the caller picks the dtype from the
  /// vocabulary), ppctl::Error when writing fails (disk full).
  void add_document(const std::vector<int32_t>& ids);

  int64_t documents() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t tokens() const { return tokens_; }
  /// The largest id written, -1 before any token.
  int64_t max_token_id() const { return max_id_; }
  /// Bytes of the .bin so far (tokens x dtype size).
  int64_t bin_bytes() const;

  /// Finishes the dataset: flushes and fsyncs the .bin, writes the .idx (Megatron's layout) and
  /// `sidecar` (PREFIX.tokenizer.json) to temporaries and fsyncs them; removes an old PREFIX.idx and
  /// PREFIX.tokenizer.json (so an old index is never paired with the new .bin), renames the .bin,
  /// then the .idx, then the sidecar, and fsyncs the folder. A reader sees the old dataset, no index
  /// (an error it reports), or the whole new dataset. Throws ppctl::Error on a system failure.
  void commit(std::string_view sidecar);

  /// The two halves of commit(), for a dataset written together with another (tokens and their loss
  /// masks): stage() writes and fsyncs everything under temporary names (`sidecar` nullopt: none, and
  /// publish() then leaves PREFIX.tokenizer.json alone); publish() removes the old index (and sidecar)
  /// and renames. Stage every writer before publishing any, so a failure leaves the old files.
  void stage(std::optional<std::string_view> sidecar);
  void publish();

 private:
  void flush();

  std::string prefix_;
  data::megatron::DType dtype_;
  std::string bin_tmp_, idx_tmp_, sidecar_tmp_;
  int fd_ = -1;
  std::vector<char> buffer_;
  std::vector<int64_t> lengths_;
  int64_t tokens_ = 0;
  int64_t max_id_ = -1;
  bool committed_ = false;
  bool has_sidecar_ = false;
};

}  // namespace ppctl::prepare
