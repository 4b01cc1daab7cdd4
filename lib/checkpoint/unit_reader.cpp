// Reading unit files lazily, checked against meta.json, and assembling a tensor-parallel shard from the saved shards
// that overlap it.
#include "checkpoint/unit_reader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/serialize.h>

#include <algorithm>

#include "checkpoint/unit_files.hpp"
#include "core/atomic_file.hpp"
#include "model/tensor_parallel.hpp"
#include "plan/shard_pieces.hpp"

namespace ppctl::checkpoint {
namespace fs = std::filesystem;

UnitReader::UnitReader(fs::path checkpoint, const CheckpointMeta& meta)
    : checkpoint_(std::move(checkpoint)), meta_(meta) {}

const UnitReader::Entries& UnitReader::file(const std::string& name) {
  if (const auto it = files_.find(name); it != files_.end()) return it->second;
  const fs::path path = checkpoint_ / name;
  const auto recorded = meta_.files.find(name);
  if (recorded == meta_.files.end()) {
    throw_corrupt_checkpoint(path, fmt::format("is not listed in meta.json, which lists the files of a checkpoint "
                                               "written at tensor_parallel {}",
                                               meta_.tensor_parallel));
  }
  const auto bytes = core::read_file(path);  // throws naming the file when it is missing
  if (bytes.size() != recorded->second.first || core::fnv1a64(bytes) != recorded->second.second) {
    throw_corrupt_checkpoint(path, "does not match the checksum in meta.json (altered or damaged)");
  }
  bytes_read_ += bytes.size();
  files_read_.push_back(name);
  Entries entries;
  try {
    for (const auto& item : torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict()) {
      entries.emplace(item.key().toStringRef(), item.value().toTensor());
    }
  } catch (const std::exception&) {
    throw_corrupt_checkpoint(path, "cannot be read as a dict of tensors");
  }
  return files_[name] = std::move(entries);
}

std::optional<torch::Tensor> UnitReader::find(const std::string& unit, const std::string& key,
                                              const std::vector<int64_t>& whole_sizes, int64_t size, int64_t rank) {
  const auto slash = key.find('/');
  const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
  const bool scalar = key.rfind("step/", 0) == 0;
  const model::Split split = model::parameter_split(name);
  const int64_t saved = meta_.tensor_parallel;
  const auto lookup = [&](const std::string& file_name) -> std::optional<torch::Tensor> {
    const auto& entries = file(file_name);
    const auto it = entries.find(key);
    if (it == entries.end()) return std::nullopt;
    return it->second;
  };
  const auto check_shape = [&](const std::string& file_name, const torch::Tensor& value,
                               const std::vector<int64_t>& expected) {
    if (value.sizes() == at::IntArrayRef(expected)) return;
    throw_corrupt_checkpoint(checkpoint_ / file_name,
                             fmt::format("holds {} with shape [{}] where the model's [{}] saved at tensor_parallel {} "
                                         "has [{}]",
                                         key, fmt::join(value.sizes(), ", "), fmt::join(whole_sizes, ", "), saved,
                                         fmt::join(expected, ", ")));
  };
  if (split.replicated()) {
    const auto file_name = replicated_file(unit, saved);
    auto value = lookup(file_name);
    if (value && !scalar) check_shape(file_name, *value, whole_sizes);
    return value;
  }
  const auto dim = static_cast<size_t>(split.dim);
  const int64_t extent = whole_sizes.at(dim);
  const auto pieces = plan::shard_pieces(extent, split.parts, saved, size, rank);
  if (scalar) return lookup(shard_file(unit, saved, pieces.front().source));
  auto wanted = whole_sizes;
  wanted[dim] = plan::shard_rows(extent, split.parts, size, rank);
  // The rank's own shard saved at its size (every piece in place in one saved shard of its length): that tensor.
  const bool own = std::all_of(pieces.begin(), pieces.end(), [&](const plan::ShardPiece& p) {
    return p.source == pieces.front().source && p.offset == p.source_offset;
  }) && plan::shard_rows(extent, split.parts, saved, pieces.front().source) == wanted[dim];
  torch::Tensor out;
  for (const auto& piece : pieces) {
    const auto file_name = shard_file(unit, saved, piece.source);
    const auto value = lookup(file_name);
    if (!value) {
      if (!out.defined()) return std::nullopt;
      throw_corrupt_checkpoint(checkpoint_ / file_name,
                               fmt::format("lacks {}, which the unit's other shard files hold", key));
    }
    auto saved_sizes = whole_sizes;
    saved_sizes[dim] = plan::shard_rows(extent, split.parts, saved, piece.source);
    check_shape(file_name, *value, saved_sizes);
    if (own) return value;
    if (!out.defined()) out = torch::empty(wanted, value->options());
    out.narrow(split.dim, piece.offset, piece.length).copy_(value->narrow(split.dim, piece.source_offset, piece.length));
  }
  return out;
}

torch::Tensor UnitReader::get(const std::string& unit, const std::string& key, const std::vector<int64_t>& whole_sizes,
                              int64_t size, int64_t rank) {
  if (auto value = find(unit, key, whole_sizes, size, rank)) return *value;
  const model::Split split = model::parameter_split(key.substr(key.find('/') + 1));
  const int64_t saved = meta_.tensor_parallel;
  const auto file_name =
      split.replicated()
          ? replicated_file(unit, saved)
          : shard_file(unit, saved,
                       plan::shard_pieces(whole_sizes.at(static_cast<size_t>(split.dim)), split.parts, saved, size,
                                          rank)
                           .front()
                           .source);
  throw_corrupt_checkpoint(checkpoint_ / file_name, fmt::format("lacks {}", key));
}

}  // namespace ppctl::checkpoint
