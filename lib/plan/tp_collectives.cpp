// The tensor-parallel collectives of a stage's actions and the time of one (see tp_collectives.hpp).
#include "plan/tp_collectives.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "plan/tensor_parallel.hpp"

namespace ppctl::plan {

double TpCollectives::all_reduce_equivalents(double activation_bytes) const {
  return static_cast<double>(all_reduces) + static_cast<double>(all_gathers + reduce_scatters) / 2.0 +
         (activation_bytes > 0.0 ? small_bytes / activation_bytes : 0.0);
}

TpCollectives& TpCollectives::operator+=(const TpCollectives& other) {
  all_reduces += other.all_reduces;
  all_gathers += other.all_gathers;
  reduce_scatters += other.reduce_scatters;
  small_all_reduces += other.small_all_reduces;
  small_bytes += other.small_bytes;
  return *this;
}

StageTpCollectives stage_tp_collectives(const config::JobSpec& spec, const StageLayout& stage) {
  StageTpCollectives out;
  const int64_t t = std::max<int64_t>(spec.pipeline.tensor_parallel, 1);
  if (t == 1) return out;
  const bool sp = spec.pipeline.sequence_parallel;
  const auto& m = spec.model;
  // Into a tp region (f: forward nothing, backward all-reduce; g with SP: all-gather, backward reduce-scatter) and
  // out of one (g: forward all-reduce, backward nothing; with SP: reduce-scatter, backward all-gather).
  const TpCollectives enter_forward{0, sp ? 1 : 0, 0, 0, 0.0};
  const TpCollectives enter_backward{sp ? 0 : 1, 0, sp ? 1 : 0, 0, 0.0};
  const TpCollectives leave_forward{sp ? 0 : 1, 0, sp ? 1 : 0, 0, 0.0};
  const TpCollectives leave_backward{0, sp ? 1 : 0, 0, 0, 0.0};
  TpCollectives forward, backward;
  const int64_t blocks = stage.layers.size();
  for (int64_t b = 0; b < blocks; ++b) {
    for (int region = 0; region < 2; ++region) {  // attention, then the MLP
      forward += enter_forward;
      forward += leave_forward;
      backward += enter_backward;
      backward += leave_backward;
    }
  }
  if (stage.has_embedding) {
    forward += leave_forward;  // the vocabulary-parallel embedding's partial rows summed
    backward += leave_backward;
  }
  if (stage.has_head) {
    forward += enter_forward;  // into the column-parallel LM head
    backward += enter_backward;
    // The vocabulary-parallel cross-entropy: each token's maxima side by side (t values) and its two sums, fp32.
    const double tokens = static_cast<double>(spec.pipeline.micro_batch_size * m.seq_len);
    forward += TpCollectives{0, 0, 0, 2, tokens * static_cast<double>(t + 2) * 4.0};
  }
  if (spec.train.recompute != config::Recompute::None) backward += forward;
  out.forward = forward;
  out.backward = backward;
  out.input_grad = backward;
  return out;
}

double tp_activation_bytes(const config::JobSpec& spec) {
  return static_cast<double>(spec.pipeline.micro_batch_size) * static_cast<double>(spec.model.seq_len) *
         static_cast<double>(spec.model.hidden) * (config::computes_in_bf16(spec.runtime.precision) ? 2.0 : 4.0);
}

double tp_all_reduce_ms(const config::JobSpec& spec, const TpCommOptions& options) {
  const int64_t t = std::max<int64_t>(spec.pipeline.tensor_parallel, 1);
  if (t == 1) return 0.0;
  if (options.collective_ms) {
    return *options.collective_ms * static_cast<double>(spec.pipeline.micro_batch_size) /
           static_cast<double>(std::max<int64_t>(options.given_micro_batch_size, 1));
  }
  const double ring = 2.0 * static_cast<double>(t - 1) / static_cast<double>(t);
  return ring * tp_activation_bytes(spec) / (options.bandwidth_gbps * 1e9) * 1e3;
}

double forward_ms(const config::JobSpec& spec, double flops_per_token, const TpCommOptions& options) {
  const double tokens = static_cast<double>(spec.pipeline.micro_batch_size * spec.model.seq_len);
  const double t = static_cast<double>(std::max<int64_t>(spec.pipeline.tensor_parallel, 1));
  return flops_per_token * tokens / t / (options.tflops * 1e12) * 1e3;
}

std::string describe(const TpCollectives& c) {
  std::vector<std::string> parts;
  const auto count = [&](int64_t n, const char* what) {
    if (n > 0) parts.push_back(fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"));
  };
  count(c.all_reduces, "all-reduce");
  count(c.all_gathers, "all-gather");
  count(c.reduce_scatters, "reduce-scatter");
  count(c.small_all_reduces, "small all-reduce");
  if (parts.empty()) return "none";
  std::string out = parts.front();
  for (size_t i = 1; i < parts.size(); ++i) out += " + " + parts[i];
  return out;
}

std::string describe_tp_collectives(const config::JobSpec& spec, const TpCommOptions& options) {
  const int64_t t = std::max<int64_t>(spec.pipeline.tensor_parallel, 1);
  StageLayout one_block;
  one_block.layers = {0, 1};
  const auto block = stage_tp_collectives(spec, one_block);
  const double ms = tp_all_reduce_ms(spec, options);
  const double bytes = tp_activation_bytes(spec);
  const std::string source =
      options.collective_ms
          ? fmt::format("--tp-collective-ms {:g} at micro_batch_size {}", *options.collective_ms,
                        options.given_micro_batch_size)
          : fmt::format("the ring's 2(t-1)/t of its bytes at {:g} GB/s, --tp-bandwidth", options.bandwidth_gbps);
  return fmt::format("tp {}{}: per block and microbatch F {}, B and I {}{}; one all-reduce of a microbatch's "
                     "activations ({} x {} x {} {}, {}) {:.4g} ms ({})",
                     t, spec.pipeline.sequence_parallel ? " with sequence parallelism" : "", describe(block.forward),
                     describe(block.backward),
                     spec.train.recompute != config::Recompute::None
                         ? fmt::format(" (recompute {} repeats F's)", config::to_string(spec.train.recompute))
                         : std::string(),
                     spec.pipeline.micro_batch_size, spec.model.seq_len, spec.model.hidden,
                     config::computes_in_bf16(spec.runtime.precision) ? "bf16" : "fp32",
                     bytes >= 1024.0 * 1024.0 ? fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0))
                                              : fmt::format("{:.1f} KiB", bytes / 1024.0),
                     ms, source);
}

}  // namespace ppctl::plan
