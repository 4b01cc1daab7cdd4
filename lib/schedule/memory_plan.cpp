// The memory estimate per pipeline rank over a Program's action order, and its report.
#include "schedule/memory_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "core/rank_list.hpp"
#include "core/error.hpp"
#include "plan/tensor_parallel.hpp"
#include "schedule/job_program.hpp"
#include "schedule/split_time.hpp"

namespace ppctl::schedule {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// The data-parallel size when optimizer.distributed shards AdamW's state over it, else 1.
int64_t optimizer_shards(const config::JobSpec& spec) {
  return spec.optimizer.distributed ? std::max<int64_t>(spec.pipeline.data_parallel, 1) : 1;
}

/// "1.25 GiB", "340.0 MiB" below one GiB, or "812.5 KiB" below one MiB (small models keep 4 digits).
std::string bytes_text(int64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (b >= kGiB) return fmt::format("{:.2f} GiB", b / kGiB);
  if (b >= 1024.0 * 1024.0) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024.0));
  return fmt::format("{:.1f} KiB", b / 1024.0);
}

/// Running value and its maximum.
struct Peak {
  int64_t now = 0;
  int64_t most = 0;
  void add(int64_t delta) {
    now += delta;
    most = std::max(most, now);
  }
};

}  // namespace

/// Positions of the F, B and I actions of an action list by (kind, stage, microbatch): a sorted vector
/// (send_release_points runs once per rank and program; a std::map per lookup dominated `plan --tune`).
class ComputeIndex {
 public:
  /// Adds `a` at `position` (F, B and I only); of equal keys, the first added is found.
  void add(const Action& a, size_t position) {
    if (a.kind == ActionKind::F || a.kind == ActionKind::B || a.kind == ActionKind::I)
      entries_.push_back({pack(a.kind, a.stage, a.microbatch), position});
  }
  void finish() {
    std::stable_sort(entries_.begin(), entries_.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  }
  std::optional<size_t> find(ActionKind kind, int64_t stage, int64_t microbatch) const {
    const uint64_t key = pack(kind, stage, microbatch);
    const auto it = std::lower_bound(entries_.begin(), entries_.end(), key,
                                     [](const auto& entry, uint64_t k) { return entry.first < k; });
    if (it == entries_.end() || it->first != key) return std::nullopt;
    return it->second;
  }

 private:
  static uint64_t pack(ActionKind kind, int64_t stage, int64_t microbatch) {
    return (static_cast<uint64_t>(kind) << 56) | (static_cast<uint64_t>(stage) << 32) |
           static_cast<uint64_t>(static_cast<uint32_t>(microbatch));
  }
  std::vector<std::pair<uint64_t, size_t>> entries_;
};

std::vector<std::vector<size_t>> send_release_points(const Program& program, int64_t rank, const RankProgram& actions,
                                                     bool (*keep)(const Action&)) {
  const auto rank_of = [&](int64_t stage) { return program.stage_to_rank.at(static_cast<size_t>(stage)); };
  ComputeIndex mine;  // compute action -> position in `actions` (the last of equal ones, as before)
  for (size_t i = actions.size(); i-- > 0;) mine.add(actions[i], i);
  mine.finish();
  // Per peer: its kept list, the position of each of its compute actions, and for each position the
  // next send to this rank at or after it.
  struct Peer {
    ComputeIndex position;
    std::vector<std::optional<Action>> next_send_to_me;
  };
  std::map<int64_t, Peer> peers;
  const auto peer = [&](int64_t q) -> Peer& {
    auto [it, fresh] = peers.try_emplace(q);
    if (!fresh) return it->second;
    RankProgram list;
    for (const auto& a : program.ranks.at(static_cast<size_t>(q))) {
      if (keep == nullptr || keep(a)) list.push_back(a);
    }
    auto& p = it->second;
    p.next_send_to_me.resize(list.size() + 1);
    for (size_t i = list.size(); i-- > 0;) {
      const auto& a = list[i];
      const bool to_me = is_send(a.kind) && rank_of(matching_transfer(a).stage) == rank;
      p.next_send_to_me[i] = to_me ? std::optional<Action>(a) : p.next_send_to_me[i + 1];
    }
    for (size_t i = 0; i < list.size(); ++i) p.position.add(list[i], i);  // the first of equal ones, as before
    p.position.finish();
    return p;
  };
  std::vector<std::vector<size_t>> release(actions.size());
  for (size_t i = 0; i < actions.size(); ++i) {
    const auto& send = actions[i];
    if (!is_send(send.kind)) continue;
    const auto recv = matching_transfer(send);  // RECV_F(s + 1, j) or RECV_B(s - 1, j) on q
    auto& q = peer(rank_of(recv.stage));
    // The compute action of q that consumes it (for a backward, I wins over B, as before).
    std::optional<size_t> consumer;
    if (send.kind == ActionKind::SEND_F) {
      consumer = q.position.find(ActionKind::F, recv.stage, recv.microbatch);
    } else {
      consumer = q.position.find(ActionKind::I, recv.stage, recv.microbatch);
      if (!consumer) consumer = q.position.find(ActionKind::B, recv.stage, recv.microbatch);
    }
    if (!consumer) continue;
    const auto& later = q.next_send_to_me[*consumer];
    if (!later) continue;
    // Where this rank consumes that later transfer.
    const auto arrives = matching_transfer(*later);
    for (auto kind : later->kind == ActionKind::SEND_F ? std::vector{ActionKind::F} : std::vector{ActionKind::B, ActionKind::I}) {
      if (auto at = mine.find(kind, arrives.stage, arrives.microbatch); at && *at > i) release[*at].push_back(i);
    }
  }
  return release;
}

ReleasePoints release_points(const Program& program) {
  ReleasePoints out;
  for (int64_t r = 0; r < program.num_ranks(); ++r)
    out.push_back(send_release_points(program, r, program.ranks[static_cast<size_t>(r)]));
  return out;
}

std::vector<RankMemory> estimate_memory(const config::JobSpec& spec, const plan::Layout& layout,
                                        const Program& program) {
  return estimate_memory(spec, layout, program, release_points(program));
}

std::vector<RankMemory> estimate_memory(const config::JobSpec& spec, const plan::Layout& layout,
                                        const Program& program, const ReleasePoints& release) {
  std::vector<plan::StageActivationBytes> per_stage;
  std::vector<plan::StageTransientBytes> transients;
  for (const auto& stage : layout.stages) {
    per_stage.push_back(plan::stage_activation_bytes(spec, stage));
    transients.push_back(plan::stage_transient_bytes(spec, stage));
  }
  const int64_t p2p = plan::p2p_bytes(spec);
  const int64_t boundary = plan::boundary_bytes(spec);
  const auto rank_of = [&](int64_t stage) { return program.stage_to_rank.at(static_cast<size_t>(stage)); };
  // One tp rank's parameters of each stage (the whole stage at tensor_parallel 1).
  std::vector<plan::StageParameters> held;
  for (const auto& stage : layout.stages) {
    held.push_back(plan::stage_parameters(spec.model, stage.layers.size(), stage.has_embedding, stage.has_head,
                                          std::max<int64_t>(spec.pipeline.tensor_parallel, 1)));
  }
  // The tied embedding's two copies (the first stage's and the last stage's), when on several stages.
  int64_t tied_copy = 0;
  for (const auto& stage : held) tied_copy += stage.tied_copy;
  std::vector<RankMemory> out;
  for (int64_t r = 0; r < program.num_ranks(); ++r) {
    RankMemory rank;
    rank.rank = r;
    for (size_t s = 0; s < layout.stages.size(); ++s) {
      const auto& stage = layout.stages[s];
      if (stage.rank != r) continue;
      rank.parameters += held[s].parameters;
      rank.tied += held[s].tied_copy + (stage.has_embedding ? tied_copy : 0);
    }
    rank.fixed = plan::static_bytes(rank.parameters, spec.runtime.precision, optimizer_shards(spec), rank.tied);
    Peak bytes, pairs, buffers, sends, receives, total;
    std::set<std::tuple<int, int64_t, int64_t>> posted;  // receives posted, not yet consumed
    std::set<std::pair<int64_t, int64_t>> outputs;        // (stage, microbatch) outputs not yet sent
    const auto consume = [&](ActionKind recv, const Action& a) {
      if (posted.erase({static_cast<int>(recv), a.stage, a.microbatch}) > 0) {
        buffers.add(-1);
        receives.add(-1);
      }
    };
    const auto& actions = program.ranks[static_cast<size_t>(r)];
    const auto& released = release.at(static_cast<size_t>(r));
    for (size_t position = 0; position < actions.size(); ++position) {
      const auto& a = actions[position];
      const auto& stage = per_stage.at(static_cast<size_t>(a.stage));
      const auto& transient = transients.at(static_cast<size_t>(a.stage));
      const int64_t before = bytes.now + buffers.now * p2p;
      switch (a.kind) {
        case ActionKind::F:
          consume(ActionKind::RECV_F, a);
          if (a.stage > 0 && rank_of(a.stage - 1) == r && outputs.erase({a.stage - 1, a.microbatch}) > 0) {
            bytes.add(-boundary);  // the previous stage's output, handed over here
          }
          bytes.add(stage.kept);
          if (a.stage + 1 < program.num_stages) {  // the output, until sent or used
            bytes.add(boundary);
            outputs.insert({a.stage, a.microbatch});
          }
          pairs.add(1);
          break;
        case ActionKind::B:
          consume(ActionKind::RECV_B, a);
          bytes.add(-stage.kept);
          pairs.add(-1);
          break;
        case ActionKind::I:
          consume(ActionKind::RECV_B, a);
          bytes.add(stage.graph - stage.kept);
          break;
        case ActionKind::W:
          bytes.add(-stage.graph);
          pairs.add(-1);
          break;
        case ActionKind::RECV_F:
        case ActionKind::RECV_B:
          posted.insert({static_cast<int>(a.kind), a.stage, a.microbatch});
          buffers.add(1);
          receives.add(1);
          break;
        case ActionKind::SEND_F:
          // Float32 on the wire: the output itself is the send buffer.
          // The executor frees a sent output's storage (the graph keeps only its node): the send
          // buffer holds it (fp32), or its bf16 copy does.
          if (outputs.erase({a.stage, a.microbatch}) > 0) bytes.add(-boundary);
          buffers.add(1);  // until send_release_points frees it, or the step's end
          sends.add(1);
          break;
        case ActionKind::SEND_B:
          buffers.add(1);
          sends.add(1);
          break;
        case ActionKind::REDUCE_GRAD:  // in place in the gradient buffers: holds nothing more
          break;
      }
      // The action's own high-water mark: F's transient bytes on top of what it leaves (its kept graph
      // and output are made before the logits and the residual temporaries); B's, I's and W's on top of
      // what was there before them (they free as they go: the backward's saved tensors, the graph).
      const int64_t during = a.kind == ActionKind::F   ? transient.forward
                             : a.kind == ActionKind::W ? transient.weight
                             : a.kind == ActionKind::I ? transient.input
                             : a.kind == ActionKind::B ? transient.backward
                                                       : 0;
      rank.transient = std::max(rank.transient, during);
      const int64_t base = a.kind == ActionKind::F ? std::max(before, bytes.now + buffers.now * p2p) : before;
      total.add(base + during - total.now);
      const auto received = static_cast<int64_t>(released[position].size());  // sends the peer has received
      buffers.add(-received);
      sends.add(-received);
      total.add(bytes.now + buffers.now * p2p - total.now);
    }
    rank.activations = bytes.most;
    rank.in_flight = pairs.most;
    rank.buffers = buffers.most;
    rank.sends = sends.most;
    rank.receives = receives.most;
    rank.communication = buffers.most * p2p;  // bf16 on the wire: half a boundary tensor
    rank.peak = total.most;
    out.push_back(rank);
  }
  return out;
}

std::vector<int64_t> sent_bytes_per_step(const config::JobSpec& spec, const Program& program) {
  std::vector<int64_t> out;
  for (const auto& actions : program.ranks) {
    const auto sends = std::count_if(actions.begin(), actions.end(), [](const Action& a) {
      return a.kind == ActionKind::SEND_F || a.kind == ActionKind::SEND_B;
    });
    out.push_back(static_cast<int64_t>(sends) * plan::p2p_bytes(spec));
  }
  return out;
}

std::optional<FittingConfiguration> fitting_configuration(const config::JobSpec& spec) {
  const double limit = spec.runtime.device_memory_gib;
  if (limit <= 0 || spec.pipeline.schedule == config::ScheduleKind::Custom) return std::nullopt;
  const auto& m = spec.model;
  const auto& p = spec.pipeline;
  const int64_t tp = std::max<int64_t>(p.tensor_parallel, 1), dp = std::max<int64_t>(p.data_parallel, 1);
  std::vector<std::pair<int64_t, int64_t>> shapes;  // (tp, pp)
  for (const int64_t t : plan::tensor_parallel_sizes(m)) {
    if (t < tp) continue;
    for (int64_t stages = p.stages; stages <= m.layers; stages *= 2) shapes.emplace_back(t, stages);
  }
  std::stable_sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
    return std::make_tuple(a.first * a.second, -a.first) < std::make_tuple(b.first * b.second, -b.first);
  });
  std::vector<std::pair<config::ScheduleKind, int64_t>> schedules{{p.schedule, p.virtual_stages}};
  if (p.schedule != config::ScheduleKind::OneFOneB) schedules.emplace_back(config::ScheduleKind::OneFOneB, 1);
  std::vector<config::Recompute> recomputes;  // the spec's, then the ones that keep less (towards full)
  for (const auto r : {config::Recompute::None, config::Recompute::Blocks, config::Recompute::Full}) {
    if (r == spec.train.recompute || !recomputes.empty()) recomputes.push_back(r);
  }
  std::vector<bool> distributed{spec.optimizer.distributed};
  if (!spec.optimizer.distributed && dp > 1) distributed.push_back(true);
  for (const auto& [t, stages] : shapes) {
    for (const auto& [kind, v] : schedules) {
      for (const auto recompute : recomputes) {
        for (const bool shard : distributed) {
          auto variant = spec;
          variant.pipeline.tensor_parallel = t;
          variant.pipeline.stages = stages;
          variant.pipeline.schedule = kind;
          variant.pipeline.virtual_stages = v;
          variant.train.recompute = recompute;
          variant.optimizer.distributed = shard;
          std::vector<std::string> pipeline, train;
          if (t != tp) pipeline.push_back(fmt::format("tensor_parallel: {}", t));
          if (stages != p.stages) {
            pipeline.push_back(fmt::format("stages: {}", stages));
            variant.pipeline.layers_per_stage.clear();
          }
          if (kind != p.schedule) {
            pipeline.push_back(fmt::format("schedule: {}, virtual_stages: {}", config::to_string(kind), v));
            variant.pipeline.microbatch_group_size = 0;
          }
          if (recompute != spec.train.recompute) train.push_back("recompute: " + config::to_string(recompute));
          if (pipeline.empty() && train.empty() && shard == spec.optimizer.distributed) continue;  // the spec itself
          if (stages * v > m.layers) continue;
          int64_t largest = 0;
          try {
            const auto program = job_program(variant);
            const auto layout = job_layout(variant, program);
            for (const auto& r : estimate_memory(variant, layout, program)) largest = std::max(largest, r.total());
          } catch (const Error&) {
            continue;  // the schedule's rules refuse this shape (e.g. microbatches against stages)
          }
          if (static_cast<double>(largest) / kGiB > limit) continue;
          FittingConfiguration fit{variant, {}, largest, t * dp * stages};
          if (!pipeline.empty()) fit.changes.push_back(fmt::format("pipeline: {{{}}}", fmt::join(pipeline, ", ")));
          if (!train.empty()) fit.changes.push_back(fmt::format("train: {{{}}}", fmt::join(train, ", ")));
          if (shard != spec.optimizer.distributed) fit.changes.emplace_back("optimizer: {distributed: true}");
          return fit;
        }
      }
    }
  }
  return std::nullopt;
}

std::vector<std::string> memory_warnings(const config::JobSpec& spec, const plan::Layout& layout,
                                         const Program& program, const std::vector<RankMemory>& ranks) {
  const double limit = spec.runtime.device_memory_gib;
  if (limit <= 0) return {};
  std::vector<int64_t> over;
  const RankMemory* least = nullptr;
  const RankMemory* most = nullptr;
  for (const auto& r : ranks) {
    if (static_cast<double>(r.total()) / kGiB <= limit) continue;
    over.push_back(r.rank);
    if (least == nullptr || r.total() < least->total()) least = &r;
    if (most == nullptr || r.total() > most->total()) most = &r;
  }
  if (over.empty()) return {};
  // Only what the spec can still change: first the settings that shrink the static bytes, each with the
  // largest rank's estimate under it (the same layout and program: neither depends on them), then more
  // stages always (while layers are left to split) and the settings that shrink the activations.
  std::vector<std::string> options;
  const auto largest_under = [&](const config::JobSpec& variant) {
    int64_t largest = 0;
    for (const auto& r : estimate_memory(variant, layout, program)) largest = std::max(largest, r.total());
    return largest;
  };
  const auto offer = [&](const std::string& setting, const config::JobSpec& variant, const char* alone) {
    const int64_t largest = largest_under(variant);
    const bool fits = static_cast<double>(largest) / kGiB <= limit;
    options.push_back(fits ? fmt::format("{} (enough {}: at most {} per rank)", setting, alone, bytes_text(largest))
                           : fmt::format("{} (at most {} per rank, not enough {})", setting, bytes_text(largest), alone));
    return fits;
  };
  const int64_t dp = std::max<int64_t>(spec.pipeline.data_parallel, 1);
  auto distributed = spec;
  distributed.optimizer.distributed = true;
  auto bf16_params = spec;
  bf16_params.runtime.precision = config::Precision::Bf16Params;
  const bool can_distribute = !spec.optimizer.distributed && dp > 1;
  const bool can_bf16_params = spec.runtime.precision != config::Precision::Bf16Params;
  bool one_fits = false;
  if (can_distribute) one_fits = offer("optimizer.distributed: true", distributed, "alone") || one_fits;
  if (can_bf16_params) one_fits = offer("runtime.precision: bf16-params", bf16_params, "alone") || one_fits;
  if (can_distribute && can_bf16_params && !one_fits) {
    bf16_params.optimizer.distributed = true;
    offer("runtime.precision: bf16-params with optimizer.distributed: true", bf16_params, "together");
  }
  options.emplace_back("more pipeline stages");
  if (spec.train.recompute == config::Recompute::None) options.emplace_back("train.recompute full or blocks");
  if (spec.train.recompute == config::Recompute::Blocks) options.emplace_back("train.recompute full");
  if (spec.pipeline.micro_batch_size > 1) options.emplace_back("a smaller pipeline.micro_batch_size");
  if (spec.runtime.precision == config::Precision::Fp32) options.emplace_back("runtime.precision bf16");
  options.emplace_back("or a larger runtime.device_memory_gib if the device has more");
  std::string fits;
  if (const auto fit = fitting_configuration(spec)) {
    const auto& q = fit->spec.pipeline;
    fits = fmt::format("; it fits with {} (tp {} x dp {} x pp {} = {} ranks): at most {} per rank",
                       fmt::join(fit->changes, ", "), q.tensor_parallel, dp, q.stages, fit->world_size,
                       bytes_text(fit->largest));
  }
  const std::string fix = fmt::format("(fix: {}{})", fmt::join(options, ", "), fits);
  if (over.size() == 1) {
    return {fmt::format("pp rank {}: estimated {} exceeds runtime.device_memory_gib = {:g} {}", most->rank,
                        bytes_text(most->total()), limit, fix)};
  }
  return {fmt::format("pp ranks {}: estimated {} to {} (pp rank {}) exceed runtime.device_memory_gib = {:g} {}",
                      core::format_rank_list(over), bytes_text(least->total()), bytes_text(most->total()),
                      most->rank, limit, fix)};
}

void log_memory_warnings(const config::JobSpec& spec, const plan::Layout& layout, const Program& program) {
  if (spec.runtime.device_memory_gib <= 0) return;
  for (const auto& w : memory_warnings(spec, layout, program, estimate_memory(spec, layout, program))) {
    spdlog::warn("{}", w);
  }
}

std::string format_memory(const config::JobSpec& spec, const plan::Layout& layout, const Program& program,
                          const std::vector<RankMemory>& ranks) {
  std::string mode = config::to_string(spec.train.recompute);
  if (spec.train.recompute == config::Recompute::Blocks) mode += fmt::format(" every {}", spec.train.recompute_every);
  // Bytes per parameter (Megatron-Core's dist_optimizer.md table): 16 or 8 + 8/dp, 18 or 6 + 12/dp.
  const auto each = plan::bytes_per_parameter(spec.runtime.precision);
  const bool bf16_params = spec.runtime.precision == config::Precision::Bf16Params;
  const std::string weights = bf16_params ? "bf16 weights + fp32 gradients" : "weights + gradients";
  const std::string optimizer = bf16_params ? "AdamW (fp32 main parameters and moments)" : "AdamW";
  const int64_t shards = optimizer_shards(spec);
  const std::string static_text =
      shards > 1
          ? fmt::format("{} = {} B per parameter, {} sharded over dp {}: {}/dp = {:g} B per parameter "
                        "(optimizer.distributed{})",
                        weights, each.parameters + each.gradients, optimizer, shards, each.optimizer,
                        static_cast<double>(each.optimizer) / static_cast<double>(shards),
                        spec.model.tie_embeddings && spec.pipeline.stages * spec.pipeline.virtual_stages > 1
                            ? fmt::format("; {} B for the tied embedding's two copies, kept whole", each.optimizer)
                            : "")
          : fmt::format("{} + {} = {} B per parameter", weights, optimizer, each.total());
  const int64_t tp = std::max<int64_t>(spec.pipeline.tensor_parallel, 1);
  const std::string per_tp_rank =
      tp > 1 ? fmt::format(", on one of its tp {} ranks (the largest, tp rank 0: the split weights / {} and the "
                           "replicated norms, row-parallel biases and positions whole; activations inside the tp "
                           "regions / {}, {}; the transient with each tp collective's copy)",
                           tp, tp, tp,
                           spec.pipeline.sequence_parallel
                               ? fmt::format("the residual stream, norms, dropout masks and what crosses a stage "
                                             "boundary / {} (sequence parallelism), the gathered inputs of the "
                                             "column-parallel products whole",
                                             tp)
                               : "the residual stream, norms and dropout masks whole (no sequence parallelism)")
             : "";
  std::string out = fmt::format(
      "\nmemory per pp rank{} (estimate; precision {}, recompute {}; {}; activations: the most kept between actions, at the peak of microbatches in flight; send and "
      "receive buffers of {} each, p2p dtype {}, the most alive at once; transient: the most one action "
      "allocates for its duration (logits, backward temporaries, recomputed graphs); peak: activations + "
      "buffers + the running action's transient, the most at any one time; gradient buckets reduce in place: "
      "0; total = weights + gradients + AdamW + peak):\n",
      per_tp_rank, config::to_string(spec.runtime.precision), mode, static_text, bytes_text(plan::p2p_bytes(spec)),
      config::to_string(config::p2p_dtype_of(spec.runtime)));
  const auto row = [](const auto&... cells) {
    return fmt::format("{:>7}  {:>10}  {:>10}  {:>10}  {:>11}  {:>9}  {:>14}  {:>14}  {:>10}  {:>10}  {:>10}\n",
                       cells...);
  };
  out += row("pp rank", "weights", "gradients", "AdamW", "activations", "in flight", "sends", "receives",
             "transient", "peak", "total");
  const int64_t p2p = plan::p2p_bytes(spec);
  for (const auto& r : ranks) {
    out += row(r.rank, bytes_text(r.fixed.parameters), bytes_text(r.fixed.gradients), bytes_text(r.fixed.optimizer),
               bytes_text(r.activations), r.in_flight, fmt::format("{} ({})", bytes_text(r.sends * p2p), r.sends),
               fmt::format("{} ({})", bytes_text(r.receives * p2p), r.receives), bytes_text(r.transient),
               bytes_text(r.peak), bytes_text(r.total()));
  }
  for (const auto& w : memory_warnings(spec, layout, program, ranks)) out += "WARNING: " + w + "\n";
  return out;
}

}  // namespace ppctl::schedule
