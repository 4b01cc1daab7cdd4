// Model FLOPs, known peak FLOP/s, MFU and the metrics.jsonl lines.
#include "observe/metrics.hpp"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "plan/balance.hpp"

namespace ppctl::observe {
namespace {

using nlohmann::json;

json number_or_null(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

json optional_number(const std::optional<double>& value) {
  return value ? number_or_null(*value) : json(nullptr);
}

/// A GPU model and its peak dense TFLOP/s (NVIDIA data sheets, SXM parts where there are several).
struct KnownGpu {
  const char* name;  // matched as a substring of the CUDA device name
  double fp32;       // fp32 without tensor cores
  double bf16;       // bf16 tensor cores, dense
};

// Most specific names first ("H100 PCIe" before "H100").
constexpr std::array<KnownGpu, 9> kKnownGpus{{
    {"H100 PCIe", 51.2, 756.0},
    {"H100", 66.9, 989.4},
    {"H200", 66.9, 989.4},
    {"GH200", 66.9, 989.4},
    {"B200", 80.0, 2250.0},
    {"A100", 19.5, 312.0},
    {"L40S", 91.6, 362.1},
    {"A10G", 31.2, 70.0},
    {"V100", 15.7, 125.0},
}};

}  // namespace

double model_flops_per_step(const config::ModelSpec& model, int64_t sequences) {
  // Per token: plan/balance's block and LM-head forward counts (the formula above).
  const double tokens = static_cast<double>(sequences) * static_cast<double>(model.seq_len);
  const double l = static_cast<double>(model.layers);
  return 3.0 * tokens * (l * plan::block_forward_flops(model) + plan::lm_head_forward_flops(model));
}

std::optional<double> known_peak_tflops(const std::string& device_name, double* bf16_tflops) {
  for (const auto& gpu : kKnownGpus) {
    if (device_name.find(gpu.name) == std::string::npos) continue;
    if (bf16_tflops != nullptr) *bf16_tflops = gpu.bf16;
    return gpu.fp32;
  }
  return std::nullopt;
}

double StepMetrics::tflops() const {
  if (step_time_s <= 0 || devices <= 0) return 0.0;
  return model_flops / step_time_s / static_cast<double>(devices) / 1e12;
}

std::optional<double> StepMetrics::mfu() const {
  if (!peak_tflops || *peak_tflops <= 0) return std::nullopt;
  return tflops() / *peak_tflops;
}

std::string metrics_json_line(const StepMetrics& m) {
  return json{{"event", "step"},
              {"step", m.step},
              {"steps", m.steps},
              {"loss", number_or_null(m.loss)},
              {"lr", number_or_null(m.lr)},
              {"grad_norm", number_or_null(m.grad_norm)},
              {"skipped", m.skipped},
              {"step_time_s", m.step_time_s},
              {"tokens", m.tokens},
              {"tokens_per_s", m.tokens_per_s()},
              {"model_flops", m.model_flops},
              {"tflops", m.tflops()},
              {"peak_tflops", optional_number(m.peak_tflops)},
              {"mfu", optional_number(m.mfu())},
              {"peak_memory_bytes", m.peak_memory_bytes},
              {"elapsed_s", m.elapsed_s}}
      .dump();
}

std::string metrics_end_line(const RunSummary& summary) {
  json line{{"event", "end"},
            {"steps", summary.steps},
            {"stopped_by", summary.stopped_by.empty() ? json(nullptr) : json(summary.stopped_by)},
            {"checkpointed", summary.checkpointed},
            {"peak_memory_bytes", summary.peak_memory_bytes},
            {"stages", summary.stages},
            {"ranks", summary.ranks},
            {"memory_kind", summary.memory_kind}};
  const auto& b = summary.bubbles;
  line["bubble_measured"] = b ? json(b->measured) : json(nullptr);
  line["bubble_planned"] = b ? json(b->planned) : json(nullptr);
  line["bubble_simulated"] = b ? json(b->simulated) : json(nullptr);
  line["step_ms_measured"] = b ? json(b->measured_step_ms) : json(nullptr);
  line["step_ms_simulated"] = b ? json(b->simulated_step_ms) : json(nullptr);
  return line.dump();
}

JsonlWriter::JsonlWriter(const std::string& path)
    : file_(core::AppendOnlyFile::create(path, "the metrics file")) {}

void JsonlWriter::write(const std::string& line) { file_.append(line + '\n'); }

}  // namespace ppctl::observe
