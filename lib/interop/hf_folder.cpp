// Opening a Hugging Face folder's safetensors files (single or sharded) and reading ppctl tensors.
#include "interop/hf_folder.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/check.hpp"
#include "core/echo.hpp"
#include "core/error.hpp"
#include "plan/shard_pieces.hpp"

namespace ppctl::interop {
namespace fs = std::filesystem;

namespace {

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

[[noreturn]] void bad_index(const fs::path& index, const std::string& why) {
  throw CheckpointError(fmt::format("{}: {} (fix: re-save the model with save_pretrained, or restore the "
                                    "missing files)",
                                    core::echo_label(index.string()), why));
}

}  // namespace

HfFolder::HfFolder(const fs::path& dir) : dir_(dir) {
  const auto index = dir / kIndexFile;
  std::error_code ec;
  if (fs::exists(index, ec)) {
    std::ifstream in(index);
    nlohmann::json root;
    try {
      root = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      bad_index(index, std::string("not valid JSON: ") + core::escape_control(e.what()));
    }
    const auto map = root.find("weight_map");
    if (!root.is_object() || map == root.end() || !map->is_object()) bad_index(index, "no 'weight_map' object");
    std::map<std::string, std::string> shard_of;  // tensor -> file name
    std::map<std::string, std::string> example;   // file name -> one of its tensors
    for (const auto& [tensor, file] : map->items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos) {
        bad_index(index, fmt::format("weight_map['{}'] must be a file name in the folder, not {}",
                                     core::echo_value(tensor), core::echo_value(file.dump())));
      }
      shard_of[tensor] = file.get<std::string>();
      example.emplace(file.get<std::string>(), tensor);
    }
    std::map<std::string, const SafetensorsFile*> opened;
    for (const auto& [file, tensor] : example) {
      if (!fs::is_regular_file(dir / file, ec)) {
        bad_index(index, fmt::format("names shard {} (for tensor '{}' and others), which is missing from {}",
                                     core::echo_value(file), core::echo_value(tensor),
                                     core::echo_label(dir.string())));
      }
      files_.push_back(std::make_unique<SafetensorsFile>(dir / file));
      opened[file] = files_.back().get();
    }
    for (const auto& [tensor, file] : shard_of) {
      const auto* shard = opened.at(file);
      if (shard->find(tensor) == nullptr) {
        bad_index(index, fmt::format("maps tensor '{}' to {}, which does not hold it", core::echo_value(tensor),
                                     core::echo_label(shard->path().string())));
      }
      by_name_[tensor] = shard;
    }
    description_ = fmt::format("{} ({} shard{})", index.string(), files_.size(), files_.size() == 1 ? "" : "s");
    return;
  }
  const auto single = dir / kSingleFile;
  if (!fs::exists(single, ec)) {
    throw CheckpointError(fmt::format("{}: holds neither {} nor {} (fix: model.init_from must name a Hugging "
                                      "Face model folder saved with safetensors, e.g. by save_pretrained)",
                                      core::echo_label(dir.string()), kSingleFile, kIndexFile));
  }
  files_.push_back(std::make_unique<SafetensorsFile>(single));
  for (const auto& [name, info] : files_.back()->tensors()) by_name_[name] = files_.back().get();
  description_ = single.string();
}

HfFolder::Found HfFolder::find(const std::vector<std::string>& names) const {
  for (const auto& name : names) {
    if (const auto it = by_name_.find(name); it != by_name_.end()) return {it->second, it->second->find(name)};
  }
  return {};
}

namespace {

/// The problem with `t` in `folder`, or empty when there is none.
std::string problem(const HfTensor& t, const HfFolder::Found& found, const std::string& files) {
  if (found.file == nullptr) {
    return fmt::format("missing tensor {} (ppctl {} {}) in {}", t.hf_names.front(), t.ppctl_name,
                       shape_text(t.hf_shape), core::echo_label(files));
  }
  const auto& shape = found.info->shape;
  const bool rows_ok = t.layout == Layout::Rows && shape.size() == 2 && shape[0] >= t.hf_shape[0] &&
                       shape[1] == t.hf_shape[1];
  if (shape != t.hf_shape && !rows_ok) {
    return fmt::format("tensor {} in {} has shape {}, the spec needs {}{} (ppctl {})", found.info->name,
                       core::echo_label(found.file->path().string()), shape_text(shape), shape_text(t.hf_shape),
                       t.layout == Layout::Rows ? " or more rows" : "", t.ppctl_name);
  }
  const auto& dtype = found.info->dtype;
  if (dtype != "F32" && dtype != "F16" && dtype != "BF16") {
    return fmt::format("tensor {} in {} has dtype {}; ppctl reads F32, F16 and BF16", found.info->name,
                       core::echo_label(found.file->path().string()), core::echo_value(dtype));
  }
  return "";
}

}  // namespace

void HfFolder::check(const std::vector<HfTensor>& tensors) const {
  std::vector<std::string> problems;
  for (const auto& t : tensors) {
    auto text = problem(t, find(t.hf_names), description_);
    if (!text.empty()) problems.push_back(std::move(text));
  }
  if (problems.empty()) return;
  throw CheckpointError(fmt::format("the weights of model.init_from do not fit the spec's model:\n  {}\n(fix: "
                                    "make the model section match the folder's config.json, or use the "
                                    "folder the model was saved to)",
                                    fmt::join(problems, "\n  ")));
}

HfFolder::SliceRead HfFolder::read(const HfTensor& t, const TensorSlice& slice) const {
  const auto found = find(t.hf_names);
  if (auto text = problem(t, found, description_); !text.empty()) {
    throw CheckpointError(text + " (fix: make the model section match the folder's config.json)");
  }
  // ppctl's view [R, C] (a vector: one column), split along `dim` (0 when whole: one piece of every row).
  const int64_t rows = t.ppctl_shape.empty() ? 1 : t.ppctl_shape[0];
  const int64_t cols = t.ppctl_shape.size() < 2 ? 1 : t.ppctl_shape[1];
  const bool whole = slice.dim < 0 || slice.size == 1;
  const int64_t dim = whole ? 0 : slice.dim;
  PPCTL_ASSERT(dim <= 1 && (dim == 0 || t.ppctl_shape.size() == 2),
               fmt::format("slice along dim {} of {} {}", dim, t.ppctl_name, shape_text(t.ppctl_shape)));
  const int64_t extent = dim == 0 ? rows : cols;
  const auto pieces = whole ? std::vector<plan::ShardPiece>{{0, 0, 0, extent}}
                            : plan::shard_pieces(extent, slice.parts, 1, slice.size, slice.rank);
  const int64_t kept = whole ? extent : plan::shard_rows(extent, slice.parts, slice.size, slice.rank);
  const int64_t out_rows = dim == 0 ? kept : rows, out_cols = dim == 0 ? cols : kept;
  SliceRead read;
  read.values.resize(static_cast<size_t>(out_rows * out_cols));
  std::vector<float> block;
  for (const auto& piece : pieces) {
    // The piece in ppctl's coordinates: rows [r, r + nr) x columns [c, c + nc), placed at (dr, dc) of the slice.
    const int64_t r = dim == 0 ? piece.source_offset : 0, nr = dim == 0 ? piece.length : rows;
    const int64_t c = dim == 0 ? 0 : piece.source_offset, nc = dim == 0 ? cols : piece.length;
    const int64_t dr = dim == 0 ? piece.offset : 0, dc = dim == 0 ? 0 : piece.offset;
    float* dst = read.values.data() + dr * out_cols + dc;
    if (t.layout != Layout::Transpose) {  // Same, Rows: the file's [rows (or more), cols], row-major
      read.bytes_read += found.file->read_f32_block(*found.info, r, nr, c, nc, dst, out_cols);
      continue;
    }
    // The file holds [C, R]: ppctl's rows are its columns. Read the file's block [nc, nr], then transpose it.
    block.resize(static_cast<size_t>(nc * nr));
    read.bytes_read += found.file->read_f32_block(*found.info, c, nc, r, nr, block.data(), nr);
    for (int64_t i = 0; i < nr; ++i)
      for (int64_t j = 0; j < nc; ++j) dst[i * out_cols + j] = block[static_cast<size_t>(j * nr + i)];
  }
  return read;
}

void check_hf_folder(const std::filesystem::path& dir, const config::ModelSpec& model) {
  HfFolder(dir).check(hf_tensors(model));
}

}  // namespace ppctl::interop
