// model.init_from: one stage's parameters from a Hugging Face folder.
#include "interop/hf_load.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <chrono>
#include <map>

#include "core/check.hpp"
#include "core/echo.hpp"
#include "interop/hf_folder.hpp"
#include "model/stage.hpp"
#include "model/tensor_parallel.hpp"

namespace ppctl::interop {
namespace {

/// This process's peak resident set so far, MiB (getrusage; Linux reports KiB).
double peak_rss_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

}  // namespace

HfLoadStats load_hf_weights(const std::filesystem::path& dir, const config::ModelSpec& model,
                            const plan::StageLayout& layout, model::StageModuleImpl& stage) {
  const auto start = std::chrono::steady_clock::now();
  const double rss_before = peak_rss_mib();
  const HfFolder folder(dir);
  std::map<std::string, HfTensor> by_name;
  for (auto& t : hf_tensors(model, layout)) by_name.emplace(t.ppctl_name, std::move(t));
  folder.check([&] {
    std::vector<HfTensor> list;
    for (const auto& [name, t] : by_name) list.push_back(t);
    return list;
  }());
  torch::NoGradGuard no_grad;
  const auto& tp = stage.tensor_parallel();
  HfLoadStats stats;
  for (auto& item : stage.named_parameters()) {
    const auto it = by_name.find(item.key());
    PPCTL_ASSERT(it != by_name.end(), "no Hugging Face tensor for parameter " + item.key());
    // Only this rank's slice is read from the file and converted (its take_shard of the whole tensor).
    const auto split = model::parameter_split(item.key());
    auto read = folder.read(it->second, {split.dim, split.parts, tp.size, tp.rank});
    auto& param = item.value();
    const auto source = torch::from_blob(read.values.data(), param.sizes(), torch::kFloat);
    PPCTL_ASSERT(static_cast<int64_t>(read.values.size()) == param.numel(), "size of " + item.key());
    param.copy_(source);
    ++stats.tensors;
    stats.bytes_read += read.bytes_read;
    stats.whole_bytes += static_cast<uint64_t>(c10::multiply_integers(it->second.ppctl_shape)) *
                         dtype_size(folder.find(it->second.hf_names).info->dtype);
  }
  spdlog::info("stage {} (tp rank {} of {}): {} parameter tensors loaded from {}, {:.2f} MiB read of their whole "
               "tensors' {:.2f} MiB, in {:.3f} s; peak RSS {:.1f} MiB before, {:.1f} MiB after",
               layout.stage, tp.rank, tp.size, stats.tensors, core::echo_label(folder.description()),
               static_cast<double>(stats.bytes_read) / (1024.0 * 1024.0),
               static_cast<double>(stats.whole_bytes) / (1024.0 * 1024.0),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), rss_before,
               peak_rss_mib());
  return stats;
}

}  // namespace ppctl::interop
