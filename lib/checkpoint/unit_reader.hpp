// Reading a checkpoint's unit files whatever tensor-parallel size wrote them: the shard a rank at another size holds
// (or the whole tensor), assembled from only the saved files that overlap it, each checked against meta.json.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_meta.hpp"

namespace ppctl::checkpoint {

/// The unit files of one checkpoint, read lazily: each file is read once (its size and FNV-1a checksum compared
/// with meta.json first) and kept until release(). A file holds the entries `param/NAME`, `exp_avg/NAME`,
/// `exp_avg_sq/NAME` (tensors) and `step/NAME` (int64 scalar) of its parameters (checkpoint_meta.hpp); at
/// meta.tensor_parallel t > 1 a split parameter's entries are spread over the unit's t shard files (shard_file) as
/// model::parameter_split cuts it, a replicated one's are in the unit's replicated file (replicated_file).
class UnitReader {
 public:
  UnitReader(std::filesystem::path checkpoint, const CheckpointMeta& meta);

  /// Tensor-parallel rank `rank` of `size`'s shard (model::take_shard's shape and values) of entry `key`
  /// (`exp_avg/block3.qkv.weight`; `step/NAME` gives the scalar) of unit `unit` (`block3`), whose parameter has
  /// the whole shape `whole_sizes`, read from only the files that hold part of it (at size == t: the rank's own
  /// shard file; replicated parameters: the replicated file); size 1 gives the whole tensor. nullopt when the first
  /// of those files lacks the entry. Throws ppctl::CheckpointError naming the file when one is missing, altered
  /// (checksum), not a dict of tensors, lacks the entry where an earlier file of the shard had it, or holds it with a
  /// shape other than the saved shard's.
  std::optional<torch::Tensor> find(const std::string& unit, const std::string& key,
                                    const std::vector<int64_t>& whole_sizes, int64_t size = 1, int64_t rank = 0);

  /// find(), throwing ppctl::CheckpointError naming the file that lacks the entry instead of returning nullopt.
  torch::Tensor get(const std::string& unit, const std::string& key, const std::vector<int64_t>& whole_sizes,
                    int64_t size = 1, int64_t rank = 0);

  /// Drops the files read so far (a reader keeps at most the files of the units read since).
  void release() { files_.clear(); }

  /// Bytes of unit files read so far, and their names in reading order (a file read again after release() counts
  /// again).
  uint64_t bytes_read() const { return bytes_read_; }
  const std::vector<std::string>& files_read() const { return files_read_; }

 private:
  using Entries = std::map<std::string, torch::Tensor>;
  const Entries& file(const std::string& name);

  std::filesystem::path checkpoint_;
  const CheckpointMeta& meta_;
  std::map<std::string, Entries> files_;
  uint64_t bytes_read_ = 0;
  std::vector<std::string> files_read_;
};

}  // namespace ppctl::checkpoint
