// ppctl checkpoint -> Hugging Face folder: config.json, (sharded) model.safetensors and the tokenizer files
// of model.init_from, atomically.
#include "interop/hf_export.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cctype>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/unit_reader.hpp"
#include "config/hf_config.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "interop/hf_names.hpp"
#include "interop/hf_source_files.hpp"
#include "interop/safetensors.hpp"

namespace ppctl::interop {
using checkpoint::CheckpointMeta;
using checkpoint::checkpoint_unit;
using checkpoint::read_checkpoint_meta;
using checkpoint::resolve_checkpoint;
namespace fs = std::filesystem;

uint64_t parse_shard_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string unit = text.substr(digits);
  static const std::map<std::string, uint64_t> units{
      {"", 1},           {"B", 1},          {"KB", 1000ULL},   {"MB", 1000'000ULL}, {"GB", 1000'000'000ULL},
      {"KiB", 1ULL << 10}, {"MiB", 1ULL << 20}, {"GiB", 1ULL << 30}};
  const auto it = units.find(unit);
  uint64_t value = 0;
  if (digits == 0 || digits > 15 || it == units.end() || (value = std::stoull(text.substr(0, digits))) == 0) {
    throw Error(fmt::format("max shard size '{}': write a positive whole number of bytes, optionally with a "
                            "unit KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g. 5GB",
                            text));
  }
  return value * it->second;
}

namespace {

/// `out` must be absent or an empty folder; its parent must exist.
void check_output(const fs::path& out) {
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec))) {
    throw CheckpointError(fmt::format("--hf {}: exists and is not an empty folder (fix: remove it or name a new "
                                      "folder)",
                                      out.string()));
  }
  const auto parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  if (!fs::is_directory(parent, ec)) {
    throw CheckpointError(fmt::format("--hf {}: {} is not an existing folder (fix: create it first)", out.string(),
                                      parent.string()));
  }
}

}  // namespace

/// `--hf` as given, made absolute and normal, without a trailing separator (`out/` names the folder out;
/// `.` the current folder). Throws CheckpointError for an empty path.
fs::path normal_output(const fs::path& given) {
  if (given.empty()) {
    throw CheckpointError("--hf: the output folder is empty (fix: name a new or empty folder, e.g. --hf out/my-model)");
  }
  fs::path out = fs::absolute(given).lexically_normal();
  while (!out.has_filename() && out.has_parent_path() && out != out.root_path()) out = out.parent_path();
  return out;
}

ExportResult export_hf(const fs::path& checkpoint_path, const fs::path& out_given, uint64_t max_shard_bytes) {
  const fs::path out = normal_output(out_given);
  const auto checkpoint = resolve_checkpoint(checkpoint_path);
  const auto meta = read_checkpoint_meta(checkpoint);  // every file there, at its recorded size
  check_output(out);

  // Tensors in HF layout, contiguous fp32, kept alive until written: whole tensors, assembled from the shard files
  // of a checkpoint written at t > 1 one unit at a time (only one unit's files are held at once). The reader
  // compares each file's checksum as it reads it, so every file is read once and checked before anything is
  // written.
  std::vector<torch::Tensor> keep;
  std::vector<interop::TensorToWrite> tensors;
  checkpoint::UnitReader reader(checkpoint, meta);
  std::string unit;
  for (const auto& t : interop::hf_tensors(meta.model)) {
    if (t.tied_copy) continue;
    if (checkpoint_unit(t.ppctl_name) != unit) {
      reader.release();
      unit = checkpoint_unit(t.ppctl_name);
    }
    auto value = reader.get(unit, "param/" + t.ppctl_name, t.ppctl_shape).to(torch::kFloat);
    if (t.layout == interop::Layout::Transpose) value = value.t();
    keep.push_back(value.contiguous());
    tensors.push_back({t.hf_names.front(), t.hf_shape, keep.back().data_ptr<float>()});
  }

  // Greedy shards in model order, as save_pretrained fills them.
  std::vector<std::vector<interop::TensorToWrite>> shards(1);
  uint64_t shard_bytes = 0, total = 0;
  for (const auto& t : tensors) {
    const uint64_t bytes = interop::safetensors_data_bytes({t});
    if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(t);
    shard_bytes += bytes;
    total += bytes;
  }

  const auto source = interop::source_files(meta.model);
  for (const auto& note : source.notes) spdlog::warn("export: {}", note);

  const auto tmp = fs::path(out.string() + fmt::format(".tmp.{}", ::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  try {
    fs::create_directory(tmp);
    core::write_file_atomically(tmp / "config.json", config::hf_config_json(meta.model, source.keys));
    interop::copy_source_files(source, tmp);
    const std::map<std::string, std::string> format{{"format", "pt"}};
    if (shards.size() == 1) {
      interop::write_safetensors(tmp / "model.safetensors", shards[0], format);
    } else {
      nlohmann::ordered_json index{{"metadata", {{"total_size", total}}}, {"weight_map", nlohmann::ordered_json::object()}};
      for (size_t i = 0; i < shards.size(); ++i) {
        const auto name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
        interop::write_safetensors(tmp / name, shards[i], format);
        for (const auto& t : shards[i]) index["weight_map"][t.name] = name;
      }
      core::write_file_atomically(tmp / "model.safetensors.index.json", index.dump(2) + "\n");
    }
    core::sync_directory(tmp);
    if (fs::exists(out, ec)) fs::remove(out);  // an empty folder (checked above)
    fs::rename(tmp, out);
    core::sync_directory(out.parent_path().empty() ? fs::path(".") : out.parent_path());
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw CheckpointError(fmt::format("--hf {}: cannot write the export: {} (fix: name a writable new or empty "
                                      "folder)",
                                      out.string(), e.code().message()));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  return {out, meta.step, static_cast<int64_t>(tensors.size()), total, static_cast<int64_t>(shards.size()),
          source.folder, source.files};
}

}  // namespace ppctl::interop
