// TensorBoard scalars from a run's metrics (see tensorboard_scalars.hpp).
#include "observe/tensorboard_scalars.hpp"

#include <fmt/format.h>

namespace ppctl::observe {

std::vector<interop::Scalar> step_scalars(const StepMetrics& m) {
  std::vector<interop::Scalar> scalars{{"train/loss", m.loss},
                                       {"train/lr", m.lr},
                                       {"train/grad_norm", m.grad_norm},
                                       {"train/tokens_per_s", m.tokens_per_s()},
                                       {"train/step_time_s", m.step_time_s},
                                       {"train/tflops", m.tflops()}};
  if (const auto mfu = m.mfu()) scalars.push_back({"train/mfu", *mfu});
  scalars.push_back({"memory/peak_bytes", static_cast<double>(m.peak_memory_bytes)});
  return scalars;
}

std::vector<interop::Scalar> eval_scalars(double loss) { return {{"eval/loss", loss}}; }

std::string bubble_tag(const std::string& kind, size_t rank) { return fmt::format("bubble/{}/rank{}", kind, rank); }

std::vector<interop::Scalar> end_scalars(const RunSummary& summary) {
  std::vector<interop::Scalar> scalars;
  if (!summary.bubbles) return scalars;
  const auto& b = *summary.bubbles;
  for (const auto& [kind, values] : {std::pair{"measured", &b.measured}, std::pair{"planned", &b.planned},
                                     std::pair{"simulated", &b.simulated}}) {
    for (size_t r = 0; r < values->size(); ++r) scalars.push_back({bubble_tag(kind, r), (*values)[r]});
  }
  return scalars;
}

}  // namespace ppctl::observe
