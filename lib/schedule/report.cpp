// Formatting of the plan report.
#include "schedule/report.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>

#include "core/echo.hpp"
#include "plan/balance.hpp"
#include "plan/parallel.hpp"
#include "schedule/memory_plan.hpp"
#include "plan/slurm_resources.hpp"
#include "plan/tensor_parallel.hpp"
#include "schedule/split_time.hpp"

namespace ppctl::schedule {
namespace {

std::string stage_contents(const plan::StageLayout& stage) {
  std::string out;
  if (stage.has_embedding) out += "embedding + ";
  out += fmt::format("blocks {}-{}", stage.layers.begin, stage.layers.end - 1);
  if (stage.has_head) out += " + final norm, LM head, loss";
  return out;
}

/// Forward actions a rank runs before its first backward (B or I): its warmup, plus the first
/// steady-state forward in 1F1B-style schedules.
int64_t forwards_before_backward(const RankProgram& actions) {
  int64_t count = 0;
  for (const auto& a : actions) {
    if (a.kind == ActionKind::B || a.kind == ActionKind::I) break;
    if (a.kind == ActionKind::F) ++count;
  }
  return count;
}

/// ", gradient reduction 5 ms per stage (from each stage's REDUCE_GRAD)" when costs.grad_reduce is set
/// (`--grad-reduce-ms`), with where the program starts it; empty when it is 0 (not modelled).
std::string grad_reduce_text(const CostModel& costs, const Program& program) {
  if (costs.grad_reduce <= 0.0) return "";
  bool in_schedule = false;
  for (const auto& actions : program.ranks)
    for (const auto& a : actions) in_schedule = in_schedule || is_reduce(a.kind);
  return fmt::format(", gradient reduction {:g} ms per stage ({})", costs.grad_reduce,
                     in_schedule ? "from each stage's REDUCE_GRAD" : "after the schedule");
}

std::string costs_text(const CostModel& costs, const Program& program) {
  if (costs.stages.size() != 1) {
    const auto range = [&](double StageCosts::*field) {
      const auto [low, high] = std::minmax_element(costs.stages.begin(), costs.stages.end(),
                                                   [&](const auto& a, const auto& b) { return a.*field < b.*field; });
      return (*low).*field == (*high).*field ? fmt::format("{:.4g}", (*low).*field)
                                             : fmt::format("{:.4g}-{:.4g}", (*low).*field, (*high).*field);
    };
    return fmt::format("{} per-stage costs (F={} B={} I={} W={} ms), p2p {:g} ms{}", costs.stages.size(),
                       range(&StageCosts::forward), range(&StageCosts::backward), range(&StageCosts::input_grad),
                       range(&StageCosts::weight_grad), costs.p2p_latency, grad_reduce_text(costs, program));
  }
  const auto& c = costs.stages.front();
  const std::string deferred =
      c.defer_penalty > 0.0 ? fmt::format(" (+{:g} when deferred)", c.defer_penalty) : std::string();
  return fmt::format("F={:g} B={:g} I={:g} W={:g}{} ms per stage, p2p {:g} ms{}", c.forward, c.backward,
                     c.input_grad, c.weight_grad, deferred, costs.p2p_latency, grad_reduce_text(costs, program));
}

/// "memory per rank 4.0, 1.5, 5.0 MiB" (one unit for all, GiB from 1 GiB), or the largest beyond 8 ranks.
std::string memory_per_rank(const std::vector<RankMemory>& ranks) {
  constexpr double kMiB = 1024.0 * 1024.0;
  std::vector<double> totals;
  for (const auto& r : ranks) totals.push_back(static_cast<double>(r.total()) / kMiB);
  const auto top = std::max_element(totals.begin(), totals.end());
  const bool gib = *top >= 1024.0;
  const auto shown = [&](double mib) { return gib ? fmt::format("{:.2f}", mib / 1024.0) : fmt::format("{:.1f}", mib); };
  if (totals.size() > 8) {
    return fmt::format("memory per rank up to {} {} (rank {})", shown(*top), gib ? "GiB" : "MiB", top - totals.begin());
  }
  std::vector<std::string> parts;
  for (const double t : totals) parts.push_back(shown(t));
  return fmt::format("memory per rank {} {}", fmt::join(parts, ", "), gib ? "GiB" : "MiB");
}

std::string piece_text(const plan::PieceTime& t) { return fmt::format("F {:.3g} B {:.3g}", t.forward_ms, t.backward_ms); }

/// The lines after the split rows saying where the per-layer costs came from.
std::string costs_source(const plan::LayerCosts& flop, const GivenLayerCosts* given,
                         const std::vector<int64_t>& balanced_counts) {
  constexpr const char* kIndent = "           ";
  if (given == nullptr) {
    return fmt::format("{}(costs from FLOPs per token, in block forwards: block 1, embedding {:.3g}, final norm + "
                       "LM head + loss {:.3g}; B = 2F; `ppctl plan --balance` shows balance auto in use; "
                       "`--layer-costs FILE|RUN_DIR` takes measured ones)\n",
                       kIndent, flop.embedding / flop.block, flop.head / flop.block);
  }
  const auto& t = given->times;
  plan::PieceTime mean;
  for (const auto& b : t.blocks) {
    mean.forward_ms += b.forward_ms / static_cast<double>(t.blocks.size());
    mean.backward_ms += b.backward_ms / static_cast<double>(t.blocks.size());
  }
  const bool equal = std::all_of(t.blocks.begin(), t.blocks.end(), [&](const plan::PieceTime& b) {
    return b.forward_ms == t.blocks.front().forward_ms && b.backward_ms == t.blocks.front().backward_ms;
  });
  std::string out = fmt::format("{}(costs from {}; ms per microbatch: block {}{}, embedding {}, final norm + LM head "
                                "+ loss {}; a split backward's I = W = B/2)\n",
                                kIndent, given->source, piece_text(mean), equal ? "" : " (mean over blocks)",
                                piece_text(t.embedding), piece_text(t.head));
  if (!given->measured.empty()) {
    std::vector<std::string> measured, fitted;
    std::vector<plan::LayerRange> split;
    for (const auto& m : given->measured) {
      measured.push_back(piece_text(m.time));
      split.push_back({split.empty() ? 0 : split.back().end, (split.empty() ? 0 : split.back().end) + m.blocks});
    }
    for (const auto& f : plan::stage_times(split, t)) fitted.push_back(piece_text(f));
    out += fmt::format("{}(measured per stage of that run: {}; fitted: {})\n", kIndent, fmt::join(measured, " | "),
                       fmt::join(fitted, " | "));
  }
  for (const auto& note : given->notes) out += fmt::format("{}(note: {})\n", kIndent, note);
  out += fmt::format("{}(`ppctl plan --balance --layer-costs ...` lays out with balance costs; to train with it, set "
                     "pipeline.layers_per_stage: [{}])\n",
                     kIndent, fmt::join(balanced_counts, ", "));
  return out;
}

/// The "split" lines: the uniform split, balance auto's, an explicit pipeline.layers_per_stage and, with
/// given per-layer times, the split balancing them (balance_by_times), each with its blocks per stage, its
/// simulated step, its slowest stage and its memory per rank; simulated under the given times (ms) or
/// else the FLOP per-layer costs (plan::flop_layer_costs, in units of one block's forward); the one the
/// job runs marked; then where the costs came from.
std::string split_section(const config::JobSpec& spec, const plan::Layout& layout, const Program& program,
                          const GivenLayerCosts* given) {
  const auto flop = plan::flop_layer_costs(spec.model);
  const auto flop_time = split_step_time(program, flop);
  const int64_t layers = spec.model.layers;
  const auto times = given ? given->times : plan::layer_times(flop, layers);
  const auto step_time = split_step_time(program, times);
  std::vector<plan::LayerRange> in_use;
  for (const auto& stage : layout.stages) in_use.push_back(stage.layers);
  std::vector<std::pair<std::string, std::vector<plan::LayerRange>>> rows{
      {"uniform", plan::partition_uniform(layers, layout.num_stages)},
      {"balance auto", plan::balance_layers(layers, layout.num_stages, flop, &flop_time)}};
  if (!spec.pipeline.layers_per_stage.empty()) rows.emplace_back("layers_per_stage", in_use);
  if (given) rows.emplace_back("balance costs", balance_by_times(spec, program, times));
  const std::string used = given && given->balanced                  ? "balance costs"
                           : !spec.pipeline.layers_per_stage.empty() ? "layers_per_stage"
                           : spec.pipeline.balance == "auto"        ? "balance auto"
                                                                    : "uniform";
  const char* unit = given ? " ms" : "";
  std::string out;
  std::vector<int64_t> balanced_counts;
  for (const auto& [name, split] : rows) {
    std::vector<int64_t> counts;
    for (const auto& r : split) counts.push_back(r.size());
    if (name == "balance costs") balanced_counts = counts;
    double slowest = 0.0;
    for (const auto& t : plan::stage_times(split, times)) slowest = std::max(slowest, given ? t.total() : t.forward_ms);
    const auto memory = estimate_memory(spec, layout_of_split(spec, program, split), program);
    out += fmt::format("{:11}{:17}[{}]  simulated step {:.2f}{}, slowest stage {} {:.2f}{}, {}{}\n",
                       out.empty() ? "split" : "", name, fmt::join(counts, ", "), step_time(split), unit,
                       given ? "F+B" : "F", slowest, unit, memory_per_rank(memory), name == used ? "  <- in use" : "");
  }
  return out + costs_source(flop, given, balanced_counts);
}

/// "p2p        bf16 between ranks (8.0 KiB per activation or gradient), sent per step by pp rank: 32.0,
/// 64.0, 64.0, 32.0 KiB": runtime.p2p_dtype resolved and sent_bytes_per_step (of each dp replica).
std::string p2p_line(const config::JobSpec& spec, const Program& program) {
  constexpr double kKiB = 1024.0;
  std::vector<std::string> sent;
  for (const int64_t bytes : sent_bytes_per_step(spec, program)) sent.push_back(fmt::format("{:.1f}", bytes / kKiB));
  return fmt::format("p2p        {} between ranks ({:.1f} KiB per activation or gradient), sent per step by pp rank: "
                     "{} KiB{}\n",
                     config::to_string(config::p2p_dtype_of(spec.runtime)), plan::p2p_bytes(spec) / kKiB,
                     fmt::join(sent, ", "), spec.pipeline.data_parallel > 1 ? " (in each dp replica)" : "");
}

/// The memory section: the estimate per pipeline rank (schedule/memory_plan.hpp) and its warnings.
std::string memory_section(const config::JobSpec& spec, const plan::Layout& layout, const Program& program) {
  return format_memory(spec, layout, program, estimate_memory(spec, layout, program));
}

/// The architecture as its authors write it: GPT-2, Llama, Qwen2, Qwen3, Mistral.
std::string arch_display_name(config::Arch arch) {
  switch (arch) {
    case config::Arch::Gpt2: return "GPT-2";
    case config::Arch::Llama: return "Llama";
    case config::Arch::Qwen2: return "Qwen2";
    case config::Arch::Qwen3: return "Qwen3";
    case config::Arch::Mistral: return "Mistral";
  }
  return config::to_string(arch);
}

}  // namespace

std::string format_plan(const config::JobSpec& spec, const plan::Layout& layout,
                        const Program& program, const Simulation& simulation, const CostModel& costs,
                        bool with_communication, const GivenLayerCosts* layer_costs) {
  const auto& m = spec.model;
  const auto& p = spec.pipeline;
  const int64_t global_batch = p.microbatches * p.micro_batch_size * layout.data_parallel;
  std::string out;
  out += fmt::format("job        {}\n", spec.source);
  const bool llama = config::llama_family(m.arch);
  const std::string heads = llama ? fmt::format("{} heads ({} key/value)", m.heads, config::kv_heads_of(m))
                                  : fmt::format("{} heads", m.heads);
  out += fmt::format("model      {}: {} blocks, hidden {}, {}, ffn {}, seq_len {}, vocab {}: {} parameters\n",
                     arch_display_name(m.arch), m.layers, m.hidden, heads, config::ffn_hidden_of(m), m.seq_len,
                     m.vocab_size, layout.total_parameters);
  {  // the training data: each source's format (and dtype), its share of the samples, and where it is
    std::string sources;
    for (const auto& d : spec.data.sources) {
      if (!sources.empty()) sources += "; ";
      const std::string what = d.format == config::DataFormat::Tokens
                                   ? fmt::format("tokens ({})", config::to_string(d.dtype))
                                   : config::to_string(d.format);
      const std::string where =  // a file name matched by a glob may come from a stranger: escaped
          d.files.size() == 1 ? core::echo_label(d.files.front()) : fmt::format("{} files", d.files.size());
      sources += spec.data.sources.size() > 1 ? fmt::format("{:.3g} x {} {}", d.weight, what, where)
                                              : fmt::format("{} {}", what, where);
    }
    out += fmt::format("data       {}{}\n", sources.empty() ? "(none)" : sources,
                       spec.data.eval_fraction > 0 ? fmt::format("; eval_fraction {:g}", spec.data.eval_fraction)
                                                   : "");
  }
  if (!m.init_from.empty()) {  // the model section as merged with the folder's config.json
    out += fmt::format("weights    from Hugging Face folder {}: arch {}, ffn_hidden {}, kv_heads {}, norm_eps {:g}{}, "
                       "tie_embeddings {}\n",
                       core::echo_label(m.init_from), config::to_string(m.arch), config::ffn_hidden_of(m), config::kv_heads_of(m),
                       m.norm_eps,
                       config::llama_family(m.arch) ? fmt::format(", rope_theta {:g}", m.rope_theta)
                                                     : ", activation " + config::to_string(m.activation),
                       m.tie_embeddings);
  }
  out += fmt::format("pipeline   {} stages on {} pipeline ranks ({} per rank), schedule {}, {} microbatches x "
                     "{} sequences x dp {} = global batch {} sequences ({} tokens)\n",
                     layout.num_stages, layout.pipeline_size, p.virtual_stages,
                     config::to_string(p.schedule), p.microbatches, p.micro_batch_size,
                     layout.data_parallel, global_batch, global_batch * m.seq_len);
  out += "parallel   " + plan::format_rank_mapping(layout.grid());
  out += "slurm      " + plan::format_slurm_resources(spec, layout.world_size);
  out += fmt::format("runtime    device {}, backend {}, precision {}, {} thread(s) per worker\n",
                     config::to_string(spec.runtime.device), config::to_string(spec.runtime.backend),
                     config::to_string(spec.runtime.precision), spec.runtime.threads_per_worker);
  out += p2p_line(spec, program);
  out += fmt::format("bubble     (p-1)/(v*m+p-1) = {}/{} = {:.3f} (equal F and B costs, non-split backward)\n",
                     layout.pipeline_size - 1, p.virtual_stages * p.microbatches + layout.pipeline_size - 1,
                     layout.bubble_fraction);
  out += fmt::format("simulated  step {:.2f} ms, bubble {:.3f} (mean over ranks) with {}\n",
                     simulation.step_time, simulation.mean_bubble_fraction, costs_text(costs, program));
  if (!costs.tp_collectives.empty()) out += fmt::format("tp comm    {}\n", costs.tp_collectives);
  out += split_section(spec, layout, program, layer_costs);
  // With tensor parallelism a column of one tp rank's parameters (the largest, tp rank 0) follows the stage's.
  const int64_t tp = std::max<int64_t>(p.tensor_parallel, 1);
  const auto per_tp_rank = [&](const std::string& cell) { return tp > 1 ? fmt::format("  {:>12}", cell) : ""; };
  out += fmt::format("\n{:>7}  {:>5}  {:>12}{}  {:>9}  {:>6}  {:>9}  {}\n", "pp rank", "stage", "parameters",
                     per_tp_rank("per tp rank"), "F before", "bubble", "peak act", "holds");
  int64_t column_sum = 0;
  int64_t copies = 0;
  for (const auto& stage : layout.stages) {
    const auto r = static_cast<size_t>(stage.rank);
    const auto shard =
        plan::stage_parameters(m, stage.layers.size(), stage.has_embedding, stage.has_head, tp).parameters;
    // A stage holding the tied LM head's copy of the embedding is marked '*' (footnote below the table).
    out += fmt::format("{:>7}  {:>5}  {:>12}{}  {:>9}  {:>6.3f}  {:>9}  {}\n", stage.rank, stage.stage,
                       fmt::format("{}{}", stage.parameters, stage.tied_copy > 0 ? "*" : ""),
                       per_tp_rank(std::to_string(shard)), forwards_before_backward(program.ranks[r]),
                       simulation.bubble_fraction[r], simulation.peak_activations[r], stage_contents(stage));
    column_sum += stage.parameters;
    copies += stage.tied_copy;
  }
  if (copies > 0) {
    out += fmt::format("* counts the LM head's copy of the tied token embedding (vocab x hidden = {}): the column "
                       "sums to {} = {} model parameters + {} copied\n",
                       copies, column_sum, layout.total_parameters, copies);
  }
  out += memory_section(spec, layout, program);
  // The lines are by pipeline rank: every replica and every tensor-parallel rank of it runs the same list.
  out += with_communication ? "\nactions per pipeline rank (with communication):\n"
                            : "\nactions per pipeline rank (compute order):\n";
  for (int64_t r = 0; r < program.num_ranks(); ++r) {
    out += fmt::format("rank {}: {}\n", r,
                       format_rank(program.ranks[static_cast<size_t>(r)], !with_communication));
  }
  return out;
}

}  // namespace ppctl::schedule
