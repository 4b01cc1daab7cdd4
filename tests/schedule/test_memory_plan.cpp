// Tests of schedule/memory_plan: microbatches in flight and activation bytes per rank from the
// action order, communication buffers, static bytes, the device-memory warning and the plan section.
#include <catch2/catch_test_macros.hpp>
#include <fmt/format.h>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>

#include "plan/layout.hpp"
#include "schedule/job_program.hpp"
#include "schedule/memory_plan.hpp"
#include "schedule/report.hpp"
#include "support/memory_spec.hpp"

using namespace ppctl;
using Catch::Matchers::ContainsSubstring;

namespace {

config::JobSpec spec_of(config::ScheduleKind kind, int64_t stages, int64_t microbatches) {
  auto spec = test::memory_test_spec();
  spec.pipeline.schedule = kind;
  spec.pipeline.stages = stages;
  spec.pipeline.microbatches = microbatches;
  if (kind == config::ScheduleKind::Interleaved1F1B || kind == config::ScheduleKind::ZBV) {
    spec.pipeline.virtual_stages = 2;
  }
  return spec;
}

struct Planned {
  plan::Layout layout;
  schedule::Program program;
  std::vector<schedule::RankMemory> ranks;
};

Planned plan_of(const config::JobSpec& spec) {
  Planned p;
  p.program = schedule::job_program(spec);
  p.layout = plan::make_layout(spec, &p.program.stage_to_rank);
  p.ranks = schedule::estimate_memory(spec, p.layout, p.program);
  return p;
}

std::vector<std::string> warnings_of(const config::JobSpec& spec, const Planned& p) {
  return schedule::memory_warnings(spec, p.layout, p.program, p.ranks);
}

std::string memory_text(const config::JobSpec& spec, const Planned& p) {
  return schedule::format_memory(spec, p.layout, p.program, p.ranks);
}

/// The largest rank's total for `spec`.
int64_t largest_total(const config::JobSpec& spec) {
  int64_t largest = 0;
  for (const auto& r : plan_of(spec).ranks) largest = std::max(largest, r.total());
  return largest;
}

}  // namespace

TEST_CASE("memory per rank: GPipe holds every microbatch, 1F1B p - r on rank r") {
  const auto spec = spec_of(config::ScheduleKind::GPipe, 4, 6);
  const auto gpipe = plan_of(spec);
  for (const auto& r : gpipe.ranks) {
    const auto& stage = gpipe.layout.stages.at(static_cast<size_t>(r.rank));
    CHECK(r.in_flight == 6);
    // + the output of the last forward, not yet sent (all but the last stage)
    const int64_t unsent = stage.has_head ? 0 : plan::boundary_bytes(spec);
    CHECK(r.activations == 6 * plan::stage_activation_bytes(spec, stage).kept + unsent);
    CHECK(r.parameters == stage.parameters);
    CHECK(r.fixed.total() == 16 * stage.parameters);
  }
  const auto one_f_one_b = plan_of(spec_of(config::ScheduleKind::OneFOneB, 4, 6));
  for (const auto& r : one_f_one_b.ranks) CHECK(r.in_flight == 4 - r.rank);
}

TEST_CASE("memory per rank: sends are held to the step's end, receives until consumed") {
  const auto spec = spec_of(config::ScheduleKind::GPipe, 2, 3);
  const auto p = plan_of(spec);
  // Rank 0 sends 3 activations; rank 1 sends 3 gradients. Each posts 3 receives of the other's.
  for (const auto& r : p.ranks) {
    CHECK(r.buffers >= 3);
    CHECK(r.buffers <= 6);
    CHECK(r.communication == r.buffers * plan::boundary_bytes(spec));
    CHECK(r.sends + r.receives >= r.buffers);
    CHECK(r.sends >= 1);
    CHECK(r.receives >= 1);
  }
}

TEST_CASE("memory per rank: the peak takes kept bytes, buffers and the running action's transient together") {
  for (const auto recompute : {config::Recompute::None, config::Recompute::Full}) {
    auto spec = spec_of(config::ScheduleKind::OneFOneB, 4, 6);
    spec.train.recompute = recompute;
    const auto p = plan_of(spec);
    for (const auto& r : p.ranks) {
      const auto& stage = p.layout.stages.at(static_cast<size_t>(r.rank));
      const auto transient = plan::stage_transient_bytes(spec, stage);
      CHECK(r.transient == std::max(transient.forward, transient.backward));  // 1F1B runs no I or W
      CHECK(r.total() == r.fixed.total() + r.peak);
      // At least the most kept, or the largest action on its own; at most the separate peaks' sum.
      CHECK(r.peak >= r.activations);
      CHECK(r.peak >= r.transient);
      CHECK(r.peak <= r.activations + r.communication + r.transient);
    }
    // The last stage's backward holds the log-softmax's and the logits' gradients (8 t v).
    const auto& last = p.layout.stages.back();
    CHECK(plan::stage_transient_bytes(spec, last).backward >=
          8 * spec.pipeline.micro_batch_size * spec.model.seq_len * spec.model.vocab_size);
  }
  // Recompute full: B rebuilds the stage's graph, so its transient exceeds the whole graph's bytes.
  auto spec = spec_of(config::ScheduleKind::OneFOneB, 4, 6);
  spec.train.recompute = config::Recompute::Full;
  const auto p = plan_of(spec);
  auto none = spec;
  none.train.recompute = config::Recompute::None;
  const auto& middle = p.layout.stages.at(1);
  CHECK(plan::stage_transient_bytes(spec, middle).backward > plan::stage_activation_bytes(none, middle).kept);
}

TEST_CASE("bf16 point-to-point: half-size buffers, half the bytes sent, the same count of sends") {
  auto spec = spec_of(config::ScheduleKind::OneFOneB, 4, 6);
  spec.runtime.precision = config::Precision::Bf16;
  spec.runtime.p2p_dtype = config::P2pDtype::Fp32;
  const auto fp32 = plan_of(spec);
  const auto fp32_sent = schedule::sent_bytes_per_step(spec, fp32.program);
  spec.runtime.p2p_dtype = config::P2pDtype::Auto;  // bf16 under precision bf16
  CHECK(plan::p2p_bytes(spec) * 2 == plan::boundary_bytes(spec));
  const auto bf16 = plan_of(spec);
  const auto bf16_sent = schedule::sent_bytes_per_step(spec, bf16.program);
  for (size_t r = 0; r < bf16.ranks.size(); ++r) {
    CHECK(bf16.ranks[r].buffers == fp32.ranks[r].buffers);
    CHECK(bf16.ranks[r].communication * 2 == fp32.ranks[r].communication);
    // Every rank but the ends sends 6 activations and 6 gradients; the first no gradients, the last no
    // activations.
    const int64_t sends = (r + 1 < bf16.ranks.size() ? 6 : 0) + (r > 0 ? 6 : 0);
    CHECK(bf16_sent[r] == sends * plan::p2p_bytes(spec));
    CHECK(fp32_sent[r] == 2 * bf16_sent[r]);
    // Recompute none: the float32 output stays in its graph after its bf16 copy is sent.
    CHECK(bf16.ranks[r].activations >= fp32.ranks[r].activations);
  }
  CHECK_THAT(memory_text(spec, bf16), ContainsSubstring("p2p dtype bf16"));

  // Interleaved on 2 ranks: every boundary crosses ranks; zbv: stages 1 and 2 share rank 1 (no send).
  auto v = spec_of(config::ScheduleKind::ZBV, 2, 4);
  v.runtime.precision = config::Precision::Bf16;
  const auto zbv = schedule::sent_bytes_per_step(v, schedule::job_program(v));
  CHECK(zbv[0] == 8 * plan::p2p_bytes(v));  // stage 0 -> 1 activations, stage 3 -> 2 gradients
  CHECK(zbv[1] == 8 * plan::p2p_bytes(v));  // stage 1 -> 0 gradients, stage 2 -> 3 activations
}

TEST_CASE("memory per rank: zero-bubble ranks hold the rebuilt graph from I until W") {
  auto spec = spec_of(config::ScheduleKind::ZBH1, 2, 4);
  spec.train.recompute = config::Recompute::Full;
  const auto split = plan_of(spec);
  spec.pipeline.schedule = config::ScheduleKind::OneFOneB;
  const auto whole = plan_of(spec);
  // Recomputed graphs waiting for W cost more than 1F1B's kept inputs alone.
  CHECK(split.ranks.at(0).activations > whole.ranks.at(0).activations);
}

TEST_CASE("memory per rank: REDUCE_GRAD holds nothing (the reduction is in place in the gradients)") {
  for (const auto kind : {config::ScheduleKind::OneFOneB, config::ScheduleKind::ZBV}) {
    auto spec = spec_of(kind, 2, 4);
    const auto reduced = plan_of(spec);
    spec.runtime.overlap_grad_reduce = false;
    const auto after = plan_of(spec);
    REQUIRE(reduced.program.ranks != after.program.ranks);  // the walk did meet REDUCE_GRAD
    REQUIRE(reduced.ranks.size() == after.ranks.size());
    for (size_t r = 0; r < reduced.ranks.size(); ++r) {
      CHECK(reduced.ranks[r].total() == after.ranks[r].total());
      CHECK(reduced.ranks[r].buffers == after.ranks[r].buffers);
      CHECK(reduced.ranks[r].in_flight == after.ranks[r].in_flight);
    }
  }
}

TEST_CASE("runtime.device_memory_gib: one warning for the ranks whose estimate exceeds it, none when 0") {
  auto spec = spec_of(config::ScheduleKind::OneFOneB, 2, 4);
  const auto p = plan_of(spec);
  CHECK(warnings_of(spec, p).empty());
  spec.runtime.device_memory_gib = 1e-4;  // 105 KB: less than either rank needs
  auto warnings = warnings_of(spec, p);
  REQUIRE(warnings.size() == 1);
  const int64_t largest = p.ranks[0].total() >= p.ranks[1].total() ? 0 : 1;
  CHECK_THAT(warnings[0], ContainsSubstring("pp ranks 0, 1: estimated ") &&
                              ContainsSubstring(fmt::format(" (pp rank {}) exceed runtime.device_memory_gib = 0.0001", largest)));
  // Between the two ranks' totals: only the larger one is named, alone.
  spec.runtime.device_memory_gib =
      static_cast<double>(p.ranks[0].total() + p.ranks[1].total()) / 2 / (1024.0 * 1024.0 * 1024.0);
  REQUIRE(p.ranks[0].total() != p.ranks[1].total());
  warnings = warnings_of(spec, p);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], ContainsSubstring(fmt::format("pp rank {}: estimated ", largest)) &&
                              ContainsSubstring(" exceeds runtime.device_memory_gib"));
  spec.runtime.device_memory_gib = 1000;
  CHECK(warnings_of(spec, p).empty());

  // The fix names only what the spec can still change (dp 1: no optimizer.distributed).
  spec.runtime.device_memory_gib = 1e-4;
  CHECK_THAT(warnings_of(spec, p)[0],
             ContainsSubstring("(fix: runtime.precision: bf16-params (at most ") &&
                 ContainsSubstring(" per rank, not enough alone), more pipeline stages, train.recompute full or "
                                   "blocks, a smaller pipeline.micro_batch_size, runtime.precision bf16, or a larger "
                                   "runtime.device_memory_gib"));
  auto tight = spec;
  tight.train.recompute = config::Recompute::Full;
  tight.pipeline.micro_batch_size = 1;
  tight.runtime.precision = config::Precision::Bf16;
  // From bf16: bf16-params is still offered, bf16 no longer.
  CHECK_THAT(warnings_of(tight, p)[0],
             ContainsSubstring("(fix: runtime.precision: bf16-params (at most ") &&
                 ContainsSubstring("not enough alone), more pipeline stages, or a larger runtime.device_memory_gib"));
  tight.runtime.precision = config::Precision::Bf16Params;
  const auto tight_warning = warnings_of(tight, p)[0];
  CHECK_THAT(tight_warning, ContainsSubstring("(fix: more pipeline stages, or a larger runtime.device_memory_gib"));
  for (const char* set : {"recompute", "micro_batch_size", "precision"}) {
    INFO(set);
    CHECK_THAT(tight_warning, !ContainsSubstring(set));
  }

  spec.runtime.device_memory_gib = 1e-4;
  const auto simulation = schedule::simulate(p.program, schedule::CostModel{});
  const auto text = schedule::format_plan(spec, p.layout, p.program, simulation, schedule::CostModel{}, false);
  CHECK_THAT(text, ContainsSubstring("memory per pp rank (estimate; precision fp32, recompute none") &&
                       ContainsSubstring("WARNING: pp ranks 0, 1: estimated"));
}

TEST_CASE("optimizer.distributed: AdamW's state 8/dp B per parameter but the tied copies', and the warning says it fits") {
  for (const auto kind : {config::ScheduleKind::OneFOneB, config::ScheduleKind::ZBV}) {
    auto spec = spec_of(kind, 2, 4);
    spec.model.tie_embeddings = true;
    spec.pipeline.data_parallel = 4;
    const auto plain = plan_of(spec);
    spec.optimizer.distributed = true;
    const auto sharded = plan_of(spec);
    const int64_t tied = spec.model.vocab_size * spec.model.hidden;
    int64_t copies = 0;
    for (size_t r = 0; r < plain.ranks.size(); ++r) {
      INFO("schedule " << static_cast<int>(kind) << ", pp rank " << r);
      const auto& a = plain.ranks[r];
      const auto& b = sharded.ranks[r];
      CHECK(a.tied == b.tied);
      CHECK(a.tied % tied == 0);
      copies += a.tied / tied;
      CHECK(a.fixed.optimizer == 8 * a.parameters);  // without the option, whatever dp
      CHECK(b.fixed.parameters == a.fixed.parameters);
      CHECK(b.fixed.gradients == a.fixed.gradients);
      CHECK(b.fixed.optimizer == 8 * b.tied + 8 * ((b.parameters - b.tied + 3) / 4));
      CHECK(b.peak == a.peak);
    }
    CHECK(copies == 2);  // the embedding and the head's copy: one per rank, or both on rank 0 under zbv
    // dp 1: nothing to shard.
    spec.pipeline.data_parallel = 1;
    const auto alone = plan_of(spec);
    for (const auto& r : alone.ranks) CHECK(r.fixed.optimizer == 8 * r.parameters);
  }
  // Rounded up: a shard holds whole elements.
  CHECK(plan::static_bytes(1001, config::Precision::Fp32, 4, 0).optimizer == 8 * 251);
  CHECK(plan::static_bytes(1000, config::Precision::Fp32, 3, 100).optimizer == 8 * 100 + 8 * 300);
  CHECK(plan::static_bytes(1000, config::Precision::Fp32, 1, 100).optimizer == 8000);

  // The device-memory warning: with dp > 1 and the option off it is offered first, and said to fit
  // when that alone brings every rank under the limit.
  auto spec = spec_of(config::ScheduleKind::OneFOneB, 2, 4);
  spec.pipeline.data_parallel = 8;
  auto p = plan_of(spec);
  int64_t sharded_total = 0, plain_total = 0;
  for (const auto& r : p.ranks) {
    plain_total = std::max(plain_total, r.total());
    sharded_total = std::max(sharded_total, r.total() - r.fixed.optimizer +
                                                plan::static_bytes(r.parameters, spec.runtime.precision, 8, r.tied).optimizer);
  }
  REQUIRE(sharded_total < plain_total);
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  spec.runtime.device_memory_gib = static_cast<double>(sharded_total + plain_total) / 2 / kGiB;
  CHECK_THAT(warnings_of(spec, p).at(0),
             ContainsSubstring("(fix: optimizer.distributed: true (enough alone: at most "));
  spec.runtime.device_memory_gib = static_cast<double>(sharded_total) / 2 / kGiB;
  CHECK_THAT(warnings_of(spec, p).at(0),
             ContainsSubstring("(fix: optimizer.distributed: true (at most ") &&
                 ContainsSubstring("per rank, not enough alone), runtime.precision: bf16-params (at most ") &&
                 ContainsSubstring("runtime.precision: bf16-params with optimizer.distributed: true ("));
  // Once on, or at dp 1, it is not offered.
  spec.optimizer.distributed = true;
  p = plan_of(spec);
  CHECK_THAT(warnings_of(spec, p).at(0), !ContainsSubstring("optimizer.distributed"));
  spec.optimizer.distributed = false;
  spec.pipeline.data_parallel = 1;
  p = plan_of(spec);
  CHECK_THAT(warnings_of(spec, p).at(0), !ContainsSubstring("optimizer.distributed"));
  // The table's header says which.
  spec.pipeline.data_parallel = 8;
  spec.optimizer.distributed = true;
  CHECK_THAT(memory_text(spec, plan_of(spec)),
             ContainsSubstring("AdamW sharded over dp 8: 8/dp = 1 B per parameter (optimizer.distributed; 8 B for the "
                               "tied embedding's two copies, kept whole)"));
  spec.model.tie_embeddings = false;
  CHECK_THAT(memory_text(spec, plan_of(spec)),
             ContainsSubstring("8/dp = 1 B per parameter (optimizer.distributed)"));
}

TEST_CASE("runtime.precision bf16-params: 18 B per parameter, or 6 + 12/dp with the tied copies' 12 B whole") {
  for (const auto kind : {config::ScheduleKind::OneFOneB, config::ScheduleKind::ZBV}) {
    auto spec = spec_of(kind, 2, 4);
    spec.model.tie_embeddings = true;
    spec.pipeline.data_parallel = 4;
    spec.runtime.precision = config::Precision::Bf16;
    const auto bf16 = plan_of(spec);
    spec.runtime.precision = config::Precision::Bf16Params;
    const auto params = plan_of(spec);
    spec.optimizer.distributed = true;
    const auto sharded = plan_of(spec);
    int64_t tied = 0;
    for (size_t r = 0; r < params.ranks.size(); ++r) {
      INFO("schedule " << static_cast<int>(kind) << ", pp rank " << r);
      const auto& a = params.ranks[r];
      const auto& b = sharded.ranks[r];
      REQUIRE(a.parameters == bf16.ranks[r].parameters);
      CHECK(a.fixed.parameters == 2 * a.parameters);
      CHECK(a.fixed.gradients == 4 * a.parameters);
      CHECK(a.fixed.optimizer == 12 * a.parameters);
      CHECK(a.fixed.total() == 18 * a.parameters);
      CHECK(bf16.ranks[r].fixed.total() == 16 * a.parameters);
      CHECK(b.fixed.parameters == a.fixed.parameters);
      CHECK(b.fixed.gradients == a.fixed.gradients);
      tied += b.tied;
      CHECK(b.fixed.optimizer == 12 * b.tied + 12 * ((b.parameters - b.tied + 3) / 4));
      // No weight copies in the graphs: never more than bf16 over fp32 weights keeps.
      CHECK(a.peak <= bf16.ranks[r].peak);
      CHECK(b.peak == a.peak);
    }
    CHECK(tied == 2 * spec.model.vocab_size * spec.model.hidden);  // the embedding's and the head's copies
  }

  // The table's header states the bytes per parameter of the mode.
  auto spec = spec_of(config::ScheduleKind::OneFOneB, 2, 4);
  spec.runtime.precision = config::Precision::Bf16Params;
  CHECK_THAT(memory_text(spec, plan_of(spec)),
             ContainsSubstring("precision bf16-params, recompute none; bf16 weights + fp32 gradients + AdamW (fp32 "
                               "main parameters and moments) = 18 B per parameter; "));
  spec.pipeline.data_parallel = 8;
  spec.optimizer.distributed = true;
  spec.model.tie_embeddings = true;
  CHECK_THAT(memory_text(spec, plan_of(spec)),
             ContainsSubstring("bf16 weights + fp32 gradients = 6 B per parameter, AdamW (fp32 main parameters and "
                               "moments) sharded over dp 8: 12/dp = 1.5 B per parameter (optimizer.distributed; 12 B "
                               "for the tied embedding's two copies, kept whole)"));
  spec.runtime.precision = config::Precision::Fp32;  // (distributed: the test above)
  spec.optimizer.distributed = false;
  CHECK_THAT(memory_text(spec, plan_of(spec)),
             ContainsSubstring("precision fp32, recompute none; weights + gradients + AdamW = 16 B per parameter; "));
}

TEST_CASE("device-memory warning: runtime.precision bf16-params with the largest rank under it, and with "
          "optimizer.distributed when neither alone is enough") {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  constexpr double kMiB = 1024.0 * 1024.0;
  for (const auto precision : {config::Precision::Fp32, config::Precision::Bf16}) {
    INFO("precision " << config::to_string(precision));
    auto spec = spec_of(config::ScheduleKind::OneFOneB, 2, 4);
    spec.pipeline.data_parallel = 4;
    spec.runtime.precision = precision;
    const auto p = plan_of(spec);
    const int64_t plain = largest_total(spec);
    auto distributed = spec;
    distributed.optimizer.distributed = true;
    auto params = spec;
    params.runtime.precision = config::Precision::Bf16Params;
    auto both = params;
    both.optimizer.distributed = true;
    const int64_t d = largest_total(distributed), b = largest_total(params), t = largest_total(both);
    REQUIRE(t < std::min(d, b));
    REQUIRE((t >= kMiB && std::max({plain, d, b}) < 1024 * kMiB));  // the warning prints MiB with one decimal
    const auto says = [](const char* setting, int64_t bytes, const char* alone) {
      return fmt::format("{} (at most {:.1f} MiB per rank, not enough {})", setting, static_cast<double>(bytes) / kMiB,
                         alone);
    };
    // Below all three: each offered with its largest rank, none enough.
    spec.runtime.device_memory_gib = static_cast<double>(t) / 2 / kGiB;
    const auto none = warnings_of(spec, p).at(0);
    CHECK_THAT(none, ContainsSubstring("(fix: " + says("optimizer.distributed: true", d, "alone") + ", " +
                                       says("runtime.precision: bf16-params", b, "alone") + ", " +
                                       says("runtime.precision: bf16-params with optimizer.distributed: true", t,
                                            "together") +
                                       ", more pipeline stages"));
    // Between the combination and either alone: the combination is enough.
    spec.runtime.device_memory_gib = static_cast<double>(t + std::min(d, b)) / 2 / kGiB;
    CHECK_THAT(warnings_of(spec, p).at(0),
               ContainsSubstring(fmt::format("runtime.precision: bf16-params with optimizer.distributed: true (enough "
                                             "together: at most {:.1f} MiB per rank)",
                                             static_cast<double>(t) / kMiB)));
    // Once one alone is enough, the combination is not offered.
    spec.runtime.device_memory_gib = static_cast<double>(std::min(d, b) + std::max(d, b)) / 2 / kGiB;
    REQUIRE(d != b);
    const auto one = warnings_of(spec, p).at(0);
    CHECK_THAT(one, ContainsSubstring(b < d ? "runtime.precision: bf16-params (enough alone: at most "
                                            : "optimizer.distributed: true (enough alone: at most ") &&
                        !ContainsSubstring("together"));
    // At dp 1: bf16-params alone, no optimizer.distributed, no combination.
    spec.pipeline.data_parallel = 1;
    spec.runtime.device_memory_gib = 1e-4;
    const auto single = warnings_of(spec, plan_of(spec)).at(0);
    CHECK_THAT(single, ContainsSubstring("(fix: runtime.precision: bf16-params (at most ") &&
                           !ContainsSubstring("optimizer.distributed") && !ContainsSubstring("together"));
    // Already bf16-params: not offered; optimizer.distributed is, with its bytes under bf16-params.
    spec.pipeline.data_parallel = 4;
    spec.runtime.precision = config::Precision::Bf16Params;
    const auto already = warnings_of(spec, plan_of(spec)).at(0);
    CHECK_THAT(already, ContainsSubstring("(fix: " + says("optimizer.distributed: true", t, "alone") +
                                          ", more pipeline stages") &&
                            !ContainsSubstring("runtime.precision"));
  }
}

TEST_CASE("estimate_memory with release points computed once equals the estimate that computes them") {
  using config::ScheduleKind;
  for (const auto kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved1F1B,
                          ScheduleKind::ZBH1, ScheduleKind::ZBV}) {
    const auto spec = spec_of(kind, 4, 8);
    const auto p = plan_of(spec);
    const auto released = schedule::release_points(p.program);
    REQUIRE(released.size() == static_cast<size_t>(p.program.num_ranks()));
    size_t releases = 0;
    for (const auto& rank : released)
      for (const auto& at : rank) releases += at.size();
    CHECK(releases > 0);  // some sends are known received before the step's end
    const auto again = schedule::estimate_memory(spec, p.layout, p.program, released);
    REQUIRE(again.size() == p.ranks.size());
    for (size_t r = 0; r < again.size(); ++r) {
      CHECK(again[r].peak == p.ranks[r].peak);
      CHECK(again[r].buffers == p.ranks[r].buffers);
      CHECK(again[r].total() == p.ranks[r].total());
    }
  }
}

namespace {

constexpr double kGiBytes = 1024.0 * 1024.0 * 1024.0;

/// Llama-3.1-405B (126 blocks, hidden 16384, ffn 53248, 128 heads, 8 key/value heads, vocab 128256, seq 8192) on
/// tp 8 x dp 8 x pp 16, 1f1b, bf16-params, the distributed optimizer, recompute full, one H200 (140.4 GiB).
config::JobSpec llama_405b() {
  config::JobSpec spec;
  auto& m = spec.model;
  m.arch = config::Arch::Llama;
  m.layers = 126;
  m.hidden = 16384;
  m.heads = 128;
  m.kv_heads = 8;
  m.ffn_hidden = 53248;
  m.vocab_size = 128256;
  m.seq_len = 8192;
  spec.pipeline.stages = 16;
  spec.pipeline.data_parallel = 8;
  spec.pipeline.tensor_parallel = 8;
  spec.pipeline.microbatches = 32;
  spec.pipeline.micro_batch_size = 1;
  spec.optimizer.distributed = true;
  spec.runtime.precision = config::Precision::Bf16Params;
  spec.train.recompute = config::Recompute::Full;
  spec.runtime.device_memory_gib = 140.4;
  return spec;
}

}  // namespace

TEST_CASE("tensor parallel: a tp rank's static bytes are its split parameters / tp and the replicated ones whole") {
  auto spec = spec_of(config::ScheduleKind::OneFOneB, 2, 4);
  spec.model.vocab_size = 257;
  spec.pipeline.tensor_parallel = 2;
  const auto p = plan_of(spec);
  const int64_t h = 64, f = 256, v = 257, s = 32;
  // From the weight shapes on one of 2 tp ranks. Split: qkv (3h/2 rows of h, bias 3h/2), proj (h/2 columns),
  // fc1 (f/2 rows, bias f/2), fc2 (f/2 columns); the token embedding's and LM head's first shard ceil(v / 2) rows.
  // Replicated: ln1, ln2 (4h), the proj and fc2 biases (2h), the positions (s h), the final LayerNorm (2h).
  const int64_t split_block = (3 * h * h + 3 * h) / 2 + h * h / 2 + (f * h + f) / 2 + h * f / 2;
  const int64_t replicated_block = 6 * h;
  const int64_t rank0 = 4 * (split_block + replicated_block) + ((v + 1) / 2) * h + s * h;
  const int64_t rank1 = 4 * (split_block + replicated_block) + ((v + 1) / 2) * h + 2 * h;
  REQUIRE(p.ranks.size() == 2);
  CHECK(p.ranks[0].parameters == rank0);
  CHECK(p.ranks[1].parameters == rank1);
  CHECK(p.ranks[0].fixed.total() == 16 * rank0);  // fp32: 4 + 4 + 8 B per parameter
  CHECK(p.ranks[1].fixed.total() == 16 * rank1);
  // The layout still counts the whole stage (all tp ranks together), and tp 1 is unchanged.
  CHECK(p.layout.stages[0].parameters > 2 * rank0 - 2 * (replicated_block * 4 + s * h) - 2 * h);
  auto whole = spec;
  whole.pipeline.tensor_parallel = 1;
  const auto q = plan_of(whole);
  CHECK(q.ranks[0].parameters == q.layout.stages[0].parameters);
  // And the activations a tp rank keeps are below the whole block's (recompute none).
  CHECK(p.ranks[0].activations < q.ranks[0].activations);
  CHECK(p.ranks[0].total() < q.ranks[0].total());
}

TEST_CASE("tensor parallel: Llama-3.1-405B fits an H200 at tp 8 x pp 16 x dp 8, not without tp") {
  const auto spec = llama_405b();
  const auto p = plan_of(spec);
  int64_t largest = 0;
  for (const auto& r : p.ranks) largest = std::max(largest, r.total());
  CHECK(static_cast<double>(largest) < 0.75 * 140.4 * kGiBytes);  // fits with room
  CHECK(warnings_of(spec, p).empty());
  CHECK_THAT(memory_text(spec, p), ContainsSubstring("memory per pp rank, on one of its tp 8 ranks"));

  auto no_tp = spec;
  no_tp.pipeline.tensor_parallel = 1;
  const auto q = plan_of(no_tp);
  const auto warnings = warnings_of(no_tp, q);
  REQUIRE(warnings.size() == 1);
  // Without tp the static bytes alone (6 + 12/8 B per parameter of 1/16 of the model) exceed the device.
  for (const auto& r : q.ranks) CHECK(static_cast<double>(r.fixed.total()) > 140.4 * kGiBytes);
  // The warning names a configuration that fits, with tp (tried before more stages at equal ranks).
  const auto fit = schedule::fitting_configuration(no_tp);
  REQUIRE(fit.has_value());
  CHECK(fit->spec.pipeline.tensor_parallel > 1);
  CHECK(static_cast<double>(fit->largest) <= 140.4 * kGiBytes);
  CHECK(fit->largest == largest_total(fit->spec));
  CHECK(fit->world_size == fit->spec.pipeline.tensor_parallel * 8 * fit->spec.pipeline.stages);
  CHECK_THAT(warnings[0],
             ContainsSubstring(fmt::format("; it fits with pipeline: {{tensor_parallel: {}",
                                           fit->spec.pipeline.tensor_parallel)) &&
                 ContainsSubstring(" ranks): at most "));
}

TEST_CASE("the memory warning's fitting configuration: more stages where no tp divides the model") {
  auto spec = spec_of(config::ScheduleKind::OneFOneB, 2, 8);
  spec.model.heads = 1;  // gpt2, one head: tp 1 only
  spec.train.recompute = config::Recompute::Full;  // else recompute on 2 stages comes first (fewer ranks)
  const auto p = plan_of(spec);
  const int64_t two_stages = largest_total(spec);
  auto four = spec;
  four.pipeline.stages = 4;
  const int64_t four_stages = largest_total(four);
  REQUIRE(four_stages < two_stages);
  spec.runtime.device_memory_gib = static_cast<double>(two_stages + four_stages) / 2 / kGiBytes;
  const auto fit = schedule::fitting_configuration(spec);
  REQUIRE(fit.has_value());
  CHECK(fit->spec.pipeline.stages == 4);
  CHECK(fit->spec.pipeline.tensor_parallel == 1);
  CHECK(fit->changes == std::vector<std::string>{"pipeline: {stages: 4}"});
  CHECK_THAT(warnings_of(spec, p).at(0),
             ContainsSubstring("; it fits with pipeline: {stages: 4} (tp 1 x dp 1 x pp 4 = 4 ranks): at most "));
  spec.runtime.device_memory_gib = 1e-6;  // nothing fits: no such clause
  CHECK(!schedule::fitting_configuration(spec).has_value());
  CHECK_THAT(warnings_of(spec, p).at(0), !ContainsSubstring("it fits with"));
}
