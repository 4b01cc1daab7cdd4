// Learning-rate schedule: warmup, then constant / cosine / linear decay (see lr_schedule.hpp).
#include "optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace ppctl::optim {

double learning_rate(const config::OptimizerSpec& spec, int64_t step, int64_t total_steps) {
  const int64_t warmup = spec.warmup_steps;
  if (step < warmup) return spec.lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (spec.lr_schedule == config::LrSchedule::Constant) return spec.lr;
  // Megatron: decay_ratio = (num_steps - warmup) / (decay_steps - warmup), num_steps = step + 1.
  const double decay_steps = static_cast<double>(std::max<int64_t>(total_steps - warmup, 1));
  const double progress =
      std::clamp(static_cast<double>(step + 1 - warmup) / decay_steps, 0.0, 1.0);
  double coefficient = 0.0;  // 1 at the start of the decay, 0 at its end
  switch (spec.lr_schedule) {
    case config::LrSchedule::Cosine: coefficient = 0.5 * (1.0 + std::cos(M_PI * progress)); break;
    case config::LrSchedule::Linear: coefficient = 1.0 - progress; break;
    case config::LrSchedule::Constant: throw InternalError("learning_rate: constant handled above");
  }
  return spec.min_lr + coefficient * (spec.lr - spec.min_lr);
}

}  // namespace ppctl::optim
