// Formatting of the plan report.
#include "schedule/report.hpp"

#include <fmt/format.h>

#include "schedule/generate.hpp"

namespace ppctl::schedule {
namespace {

std::string stage_contents(const plan::StageLayout& stage) {
  std::string out;
  if (stage.has_embedding) out += "embedding + ";
  out += fmt::format("blocks {}-{}", stage.layers.begin, stage.layers.end - 1);
  if (stage.layers.size() == 0) out = stage.has_embedding ? "embedding" : "(no blocks)";
  if (stage.has_head) out += " + final norm, LM head, loss";
  return out;
}

}  // namespace

std::string format_plan(const config::JobSpec& spec, const plan::Layout& layout,
                        const Program& program, bool with_communication) {
  const auto& m = spec.model;
  const auto& p = spec.pipeline;
  const int64_t global_batch = p.microbatches * p.micro_batch_size;
  std::string out;
  out += fmt::format("job        {}\n", spec.source);
  out += fmt::format("model      GPT: {} blocks, hidden {}, {} heads, seq_len {}, vocab {}: {} parameters\n",
                     m.layers, m.hidden, m.heads, m.seq_len, m.vocab_size, layout.total_parameters);
  out += fmt::format("pipeline   {} stages on {} ranks, schedule {}, {} microbatches x {} sequences "
                     "= global batch {} sequences ({} tokens)\n",
                     layout.num_stages, layout.world_size, config::to_string(p.schedule),
                     p.microbatches, p.micro_batch_size, global_batch, global_batch * m.seq_len);
  out += fmt::format("runtime    device {}, backend {}, {} thread(s) per worker\n",
                     config::to_string(spec.runtime.device), config::to_string(spec.runtime.backend),
                     spec.runtime.threads_per_worker);
  out += fmt::format("bubble     (p-1)/(m+p-1) = {}/{} = {:.3f}\n\n", layout.num_stages - 1,
                     p.microbatches + layout.num_stages - 1, layout.bubble_fraction);
  out += fmt::format("{:>4}  {:>5}  {:>12}  {:>6}  {}\n", "rank", "stage", "parameters", "warmup",
                     "holds");
  for (const auto& stage : layout.stages) {
    out += fmt::format("{:>4}  {:>5}  {:>12}  {:>6}  {}\n", stage.rank, stage.stage, stage.parameters,
                       warmup_microbatches(p.schedule, layout.num_stages, p.microbatches, stage.rank),
                       stage_contents(stage));
  }
  out += with_communication ? "\nactions per rank (with communication):\n"
                            : "\nactions per rank (compute order):\n";
  for (int64_t r = 0; r < program.num_ranks(); ++r) {
    out += fmt::format("rank {}: {}\n", r,
                       format_rank(program.ranks[static_cast<size_t>(r)], !with_communication));
  }
  return out;
}

}  // namespace ppctl::schedule
