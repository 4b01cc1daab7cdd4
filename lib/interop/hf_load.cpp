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

namespace ppctl::interop {
namespace {

/// This process's peak resident set so far, MiB (getrusage; Linux reports KiB).
double peak_rss_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

}  // namespace

void load_hf_weights(const std::filesystem::path& dir, const config::ModelSpec& model,
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
  int64_t bytes = 0;
  for (auto& item : stage.named_parameters()) {
    const auto it = by_name.find(item.key());
    PPCTL_ASSERT(it != by_name.end(), "no Hugging Face tensor for parameter " + item.key());
    auto values = folder.read(it->second);
    auto& param = item.value();
    const auto& shape = it->second.ppctl_shape;  // whole; at t > 1 the stage holds its shard of it
    const auto source = torch::from_blob(values.data(), shape, torch::kFloat);
    PPCTL_ASSERT(static_cast<int64_t>(values.size()) == source.numel(), "size of " + item.key());
    param.copy_(stage.shard_of(item.key(), source));
    bytes += static_cast<int64_t>(values.size() * sizeof(float));
  }
  spdlog::info("stage {}: {} parameter tensors ({:.1f} MiB) loaded from {} in {:.3f} s; peak RSS {:.1f} MiB "
               "before, {:.1f} MiB after",
               layout.stage, by_name.size(), static_cast<double>(bytes) / (1024.0 * 1024.0),
               core::echo_label(folder.description()),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), rss_before,
               peak_rss_mib());
}

}  // namespace ppctl::interop
