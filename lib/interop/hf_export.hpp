// `ppctl export CHECKPOINT --hf OUT`: a ppctl checkpoint as a Hugging Face model folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ppctl::interop {

/// Hugging Face's default shard limit (save_pretrained's max_shard_size "5GB" = 5 x 10^9 bytes).
inline constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000ULL;

/// Parses a size as save_pretrained's max_shard_size does: an integer number of bytes, or a number
/// with a unit KB/MB/GB (powers of 1000) or KiB/MiB/GiB (powers of 1024), e.g. `5GB`, `200MiB`,
/// `4096`. Throws ppctl::Error naming the text when it is none of these or is 0.
uint64_t parse_shard_size(const std::string& text);

/// What export_hf wrote.
struct ExportResult {
  std::filesystem::path folder;
  int64_t step = 0;       ///< the checkpoint's step
  int64_t tensors = 0;
  uint64_t bytes = 0;     ///< tensor data, fp32
  int64_t shards = 0;     ///< 1: model.safetensors; more: model-0000i-of-0000n.safetensors + index
  std::filesystem::path source;      ///< model.init_from, where `copied` came from; empty when none
  std::vector<std::string> copied;   ///< the files copied from `source` (tokenizer files, generation_config.json)
};

/// Writes `out` = config.json (config::hf_config_json of the checkpoint's model, with the token ids and the
/// llama family's longest context of its model.init_from: interop::source_files), the tokenizer files and
/// generation_config.json of model.init_from when the vocabulary is unchanged (interop::source_files; what
/// is not copied, and why, is logged as a warning), and the weights
/// in Hugging Face names and layouts (interop::hf_tensors; Conv1D weights transposed back; tied models
/// without lm_head.weight, as save_pretrained writes them), fp32, as model.safetensors, or as shards of
/// at most `max_shard_bytes` of tensor data each (a tensor larger than the limit gets a shard of its
/// own) with model.safetensors.index.json (metadata.total_size, weight_map) when they do not fit one.
/// `checkpoint` is a checkpoint folder or a checkpoint.dir (its `latest`), checked (sizes and
/// checksums) before anything is written. Atomic: everything is written into a temporary folder next to
/// `out`, synced, then renamed to `out`, so `out` appears complete or not at all.
/// Throws ppctl::CheckpointError when the checkpoint is missing, incomplete or corrupt, or `out`
/// exists and is not an empty folder; ppctl::Error naming the file on an I/O failure.
ExportResult export_hf(const std::filesystem::path& checkpoint, const std::filesystem::path& out,
                       uint64_t max_shard_bytes = kDefaultMaxShardBytes);

}  // namespace ppctl::interop
