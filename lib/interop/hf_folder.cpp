// Opening a Hugging Face folder's safetensors files (single or sharded) and reading ppctl tensors.
#include "interop/hf_folder.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/echo.hpp"
#include "core/error.hpp"

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

std::vector<float> HfFolder::read(const HfTensor& t) const {
  const auto found = find(t.hf_names);
  if (auto text = problem(t, found, description_); !text.empty()) {
    throw CheckpointError(text + " (fix: make the model section match the folder's config.json)");
  }
  auto values = found.file->read_f32(found.info->name);
  if (t.layout == Layout::Rows) {
    values.resize(static_cast<size_t>(t.ppctl_shape[0] * t.ppctl_shape[1]));
  } else if (t.layout == Layout::Transpose) {
    const auto rows = static_cast<size_t>(t.hf_shape[0]), cols = static_cast<size_t>(t.hf_shape[1]);
    std::vector<float> out(values.size());
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) out[c * rows + r] = values[r * cols + c];
    values.swap(out);
  }
  return values;
}

void check_hf_folder(const std::filesystem::path& dir, const config::ModelSpec& model) {
  HfFolder(dir).check(hf_tensors(model));
}

}  // namespace ppctl::interop
