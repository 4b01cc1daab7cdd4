// The correctness oracle: gradients of one pipelined step (real worker processes over Gloo) equal
// those of one unpipelined process over the same global batch, for every schedule, stage count,
// placement and microbatch split.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)
#include <catch2/generators/catch_generators.hpp>

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "config/load.hpp"
#include "core/error.hpp"
#include "schedule/csv.hpp"
#include "schedule/generate.hpp"
#include "schedule/zb_auto.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_job.hpp"
#include "train/oracle.hpp"

namespace fs = std::filesystem;
using namespace ppctl;

namespace {

struct Case {
  int64_t ranks;
  std::string schedule;
  int64_t microbatches;
  int64_t layers;
  double dropout = 0.0;
  int64_t virtual_stages = 1;
  std::string extra = "";  // more pipeline keys
  bool tied = true;        // model.tie_embeddings
  std::string model = "";  // more model keys, e.g. kLlama
  std::string runtime = "";  // more runtime keys, e.g. ", grad_bucket_size: 1000"
  std::string optimizer = "";  // optimizer keys, e.g. "distributed: true"
};

/// The keys of a small Llama (grouped-query attention, 2 key/value heads for 4 query heads).
const std::string kLlama = ", arch: llama, kv_heads: 2, ffn_hidden: 48";

std::string name_of(const Case& c) {
  return fmt::format("{}_p{}_v{}_m{}_l{}_d{}{}{}{}", c.schedule, c.ranks, c.virtual_stages,
                     c.microbatches, c.layers, c.dropout > 0 ? 1 : 0, c.tied ? "" : "_untied",
                     c.model.empty() ? "" : "_llama", c.optimizer.empty() ? "" : "_opt");
}

fs::path make_job(const Case& c, const fs::path& dir) {
  std::string corpus;
  for (int i = 0; i < 400; ++i) corpus += fmt::format("line {}: the quick brown fox jumps over the lazy dog\n", i);
  test::write_checked(dir / "corpus.txt", corpus);
  const auto spec = dir / "job.yaml";
  test::write_checked(spec, fmt::format(R"(model: {{layers: {}, hidden: 32, heads: 4, seq_len: 16, dropout: {}, tie_embeddings: {}{}}}
pipeline: {{stages: {}, virtual_stages: {}, schedule: {}, microbatches: {}, micro_batch_size: 2{}}}
data: {{path: corpus.txt}}
train: {{steps: 1, seed: 17}}
runtime: {{comm_timeout_s: 60, threads_per_worker: 1{}}}
optimizer: {{{}}}
)",
                     c.layers, c.dropout, c.tied, c.model, c.ranks, c.virtual_stages, c.schedule,
                     c.microbatches, c.extra, c.runtime, c.optimizer));
  return spec;
}

/// Runs one pipelined step in real worker processes: every gradient (and the loss), and what the workers printed.
struct Pipelined {
  train::GradientMap gradients;
  std::string output;
};
Pipelined pipelined_gradients(const fs::path& spec_path, int64_t ranks, const fs::path& dump_dir) {
  fs::create_directories(dump_dir);
  const auto run = test::run_job(spec_path, {"--dump-gradients", dump_dir.string()});
  INFO(run.output);
  REQUIRE(run.result.exit_code == 0);
  return {train::load_gradient_dumps(dump_dir.string(), ranks), run.output};
}

/// Checks the pipelined gradients of `spec_path` against the unpipelined reference (1e-5 relative);
/// returns what the workers printed.
std::string check_parity(const Case& c, const fs::path& dir, const fs::path& spec_path) {
  at::set_num_threads(1);
  const auto spec = config::load_job_spec(spec_path.string());
  INFO(name_of(c));
  // Every rank of every replica writes a dump; copies (a stage on each replica, the global norm on
  // every rank) must be bitwise equal (load_gradient_dumps checks).
  const int64_t world = c.ranks * std::max<int64_t>(spec.pipeline.data_parallel, 1) * spec.pipeline.tensor_parallel;
  const auto pipelined = pipelined_gradients(spec_path, world, dir / "dump");
  const auto reference = train::reference_gradients(spec);
  // Tied embeddings over several stages: the last stage's copy is one more entry and one more row.
  const size_t copies = c.tied && c.ranks * c.virtual_stages > 1 ? 1 : 0;
  REQUIRE(pipelined.gradients.size() == reference.size() + copies);
  const auto rows = train::compare_gradients(pipelined.gradients, reference);
  REQUIRE(rows.size() == reference.size() + copies);  // every parameter and the loss are compared
  for (const auto& row : rows) {
    INFO(row.name);
    CHECK(row.reference_max_abs > 0.0);  // the comparison is not vacuous
    CHECK(row.max_relative_difference <= 1e-5);
  }
  return pipelined.output;
}

/// A fresh folder for one case (mkdtemp), removed when the test process exits.
fs::path fresh_dir(const std::string& name) { return test::process_temp_dir("ppctl_parity_" + name + "_"); }

}  // namespace

TEST_CASE("pipelined gradients equal unpipelined gradients for every schedule") {
  const auto c = GENERATE(Case{2, "1f1b", 4, 4}, Case{2, "gpipe", 4, 4},
                          Case{4, "1f1b", 6, 5}, Case{4, "gpipe", 6, 5},
                          Case{4, "1f1b", 2, 4},                  // fewer microbatches than stages
                          Case{4, "1f1b", 1, 4},                  // a single microbatch
                          Case{2, "1f1b", 3, 3, 0.1},             // dropout: masks seeded per (step, mb, layer)
                          Case{2, "interleaved-1f1b", 4, 4, 0.0, 2},  // next and previous peer are one rank
                          Case{4, "interleaved-1f1b", 8, 8, 0.0, 2},
                          Case{2, "zb-h1", 4, 4}, Case{4, "zb-h1", 6, 4, 0.1},
                          Case{2, "zbv", 4, 4, 0.0, 2}, Case{4, "zbv", 6, 8, 0.0, 2});
  const auto dir = fresh_dir(name_of(c));
  check_parity(c, dir, make_job(c, dir));
}

TEST_CASE("zb-auto meets the oracle with W deferred from its costs, kept by its I, and under dp") {
  // Costs that defer W (W = 3 F); per-stage costs with a defer penalty and dropout under an in-flight
  // limit of 2 (the last rank defers, its W forced out by the limit); a penalty above any step (every W
  // right after its I); dp 2 with REDUCE_GRAD after each stage's last W.
  struct ZbCase {
    Case c;
    bool defers;  // the program defers some W (checked, so that the case tests what it says)
  };
  const auto z = GENERATE(
      ZbCase{Case{2, "zb-auto", 4, 4, 0.0, 1, ", zb_auto: {f: 1, i: 1, w: 3}"}, true},
      ZbCase{Case{4, "zb-auto", 6, 4, 0.1, 1,
                  ", zb_auto: {i: [1, 1, 1, 1], w: [3, 3, 3, 3], defer_penalty: 0.2, max_in_flight: 2}"},
             true},
      ZbCase{Case{4, "zb-auto", 8, 4, 0.0, 1, ", zb_auto: {defer_penalty: 1000}"}, false},
      ZbCase{Case{2, "zb-auto", 3, 4, 0.0, 1, ", zb_auto: {w: 3}, data_parallel: 2", true, "",
                  ", grad_bucket_size: 2000"},
             true});
  const auto dir = fresh_dir(name_of(z.c) + (z.defers ? "_defers" : "_keeps"));
  const auto spec_path = make_job(z.c, dir);
  const auto plan = schedule::plan_zb_auto(schedule::schedule_params(config::load_job_spec(spec_path.string())));
  int64_t deferred = 0;
  for (const int64_t n : plan.deferred_w) deferred += n;
  INFO(plan.placement);
  CHECK((deferred > 0) == z.defers);
  const auto output = check_parity(z.c, dir, spec_path);
  // The executor's counter of microbatches in flight equals the simulated peak on every rank (so the limit,
  // which the simulation respects, holds where it matters), on every replica.
  static const std::regex line(R"(\[rank (\d+)\][^\n]*at most (\d+) microbatch\(es\) in flight)");
  std::map<int64_t, int64_t> measured;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line); it != std::sregex_iterator(); ++it)
    measured[std::stoll((*it)[1])] = std::stoll((*it)[2]);
  INFO(output);
  const int64_t dp = z.c.extra.find("data_parallel: 2") != std::string::npos ? 2 : 1;
  REQUIRE(measured.size() == static_cast<size_t>(z.c.ranks * dp));
  for (const auto& [rank, in_flight] : measured) {
    const auto pp_rank = static_cast<size_t>(rank / dp);  // rank = pp_rank x dp + dp_rank (plan::RankGrid, tp 1)
    INFO("rank " << rank);
    CHECK(in_flight == plan.peak_in_flight.at(pp_rank));
    CHECK(in_flight <= plan.in_flight_limit.at(pp_rank));
  }
}

TEST_CASE("data parallel x pipeline parallel meets the oracle over the whole global batch") {
  // dp replicas each run m microbatches of their own; the reference runs all dp x m in one process.
  // Replicas reading the same data, or a missing / unaveraged all-reduce, would fail the comparison.
  // Every schedule family reduces inside its schedule (REDUCE_GRAD, the default), in buckets of about
  // 2000 parameters (several per stage, one parameter larger than a bucket); one case reduces after
  // the schedule instead.
  const std::string buckets = ", grad_bucket_size: 2000";
  const auto c = GENERATE_COPY(Case{2, "1f1b", 3, 4, 0.0, 1, ", data_parallel: 2"},
                               Case{2, "1f1b", 2, 4, 0.1, 1, ", data_parallel: 2"},  // dropout per replica
                               Case{1, "1f1b", 2, 2, 0.0, 1, ", data_parallel: 3"},  // pure data parallel
                               Case{2, "zbv", 4, 4, 0.0, 2, ", data_parallel: 2"},
                               Case{2, "gpipe", 4, 4, 0.0, 1, ", data_parallel: 2", true, "", buckets},
                               Case{2, "1f1b", 4, 4, 0.0, 1, ", data_parallel: 2", true, "", buckets},
                               Case{2, "interleaved-1f1b", 4, 4, 0.0, 2, ", data_parallel: 2", true, "", buckets},
                               Case{2, "zb-h1", 4, 4, 0.0, 1, ", data_parallel: 2", true, "", buckets},
                               Case{2, "zbv", 4, 4, 0.0, 2, ", data_parallel: 2", true, "", buckets},
                               Case{2, "zb-h1", 4, 4, 0.0, 1, ", data_parallel: 3", false, "",
                                    buckets + ", overlap_grad_reduce: false"});
  const auto dir = fresh_dir(name_of(c) + "_dp");
  check_parity(c, dir, make_job(c, dir));
}

TEST_CASE("the distributed optimizer's sharded reduction meets the oracle in every schedule family") {
  // optimizer.distributed: each replica reduce-scatters its buckets (padded to a multiple of dp) and keeps
  // the mean of its shard only; the gradient dump all-gathers the shards, so every replica's gradients
  // must equal the reference whole, the tied copies included. Buckets of about 2000 parameters cut
  // parameters at shard edges.
  const std::string buckets = ", grad_bucket_size: 2000";
  const std::string sharded = "distributed: true";
  const auto c = GENERATE_COPY(Case{2, "1f1b", 3, 4, 0.0, 1, ", data_parallel: 2", true, "", buckets, sharded},
                               Case{2, "gpipe", 4, 4, 0.0, 1, ", data_parallel: 2", true, "", buckets, sharded},
                               Case{2, "zb-h1", 4, 4, 0.0, 1, ", data_parallel: 2", true, "", buckets, sharded},
                               Case{2, "interleaved-1f1b", 4, 4, 0.0, 2, ", data_parallel: 2", true, "", buckets,
                                    sharded},
                               Case{2, "zbv", 4, 4, 0.0, 2, ", data_parallel: 3", false, kLlama, buckets, sharded});
  const auto dir = fresh_dir(name_of(c) + "_dp");
  check_parity(c, dir, make_job(c, dir));
}

TEST_CASE("bf16 parameters meet the oracle of bf16 weights and fp32 gradients in every schedule family") {
  // runtime.precision bf16-params: the stages compute with bf16 weights and autograd adds each microbatch's
  // bf16 weight gradient into fp32 .grad (the gradient buffers); the reference rounds its weights the same
  // way and accumulates into fp32 .grad too, so both sides do the same arithmetic (both scale a microbatch's
  // loss by 1/m and average the replicas in fp32; at dp 3 a reference that scaled by 1/(dp m) rounded its bf16
  // gradients otherwise, 3.7e-3 apart: `ppctl verify` failed). Replicated and distributed
  // optimizer, bf16 (auto) and fp32 between ranks, tied copies on two ranks and, under zbv, on one; and one
  // stage holding both ends (the head's use of the embedding accumulated into fp32 by itself, through I and W).
  const std::string buckets = ", grad_bucket_size: 2000";
  const std::string bf16 = ", precision: bf16-params";
  const std::string fp32_wire = bf16 + ", p2p_dtype: fp32";
  const std::string sharded = "distributed: true";
  const auto c = GENERATE_COPY(Case{2, "1f1b", 3, 4, 0.0, 1, ", data_parallel: 2", true, "", buckets + bf16},
                               Case{2, "gpipe", 4, 4, 0.0, 1, ", data_parallel: 2", true, "", buckets + fp32_wire,
                                    sharded},
                               Case{2, "zb-h1", 4, 4, 0.1, 1, ", data_parallel: 2", true, kLlama, buckets + bf16,
                                    sharded},
                               Case{2, "interleaved-1f1b", 4, 4, 0.0, 2, ", data_parallel: 2", false, "",
                                    buckets + bf16},
                               Case{2, "zbv", 4, 4, 0.0, 2, ", data_parallel: 2", true, kLlama, buckets + fp32_wire,
                                    sharded},
                               Case{1, "zb-h1", 3, 4, 0.0, 1, ", data_parallel: 2", true, "", buckets + bf16},
                               Case{2, "1f1b", 3, 4, 0.0, 1, ", data_parallel: 3", true, "", buckets + bf16,
                                    sharded});
  const auto dir = fresh_dir(name_of(c) + "_bf16params");
  check_parity(c, dir, make_job(c, dir));
}

TEST_CASE("tied embeddings meet the oracle of one shared weight; untied ones that of two") {
  // Tied (the default, also in every case above): the first stage's tok_embed and the last stage's
  // copy must both hold the gradient of the reference's one shared weight (compare_gradients adds
  // the copy as a row). zbv puts the first and the last stage on rank 0 (a local sum, no group).
  const auto c = GENERATE(Case{2, "1f1b", 4, 4, 0.0, 1, "", false}, Case{4, "1f1b", 4, 4, 0.0, 1, "", false},
                          Case{1, "1f1b", 2, 2}, Case{4, "gpipe", 4, 4, 0.1},
                          Case{2, "zbv", 4, 4, 0.0, 2}, Case{2, "1f1b", 3, 4, 0.0, 1, ", data_parallel: 2"});
  const auto dir = fresh_dir(name_of(c) + "_tied");
  check_parity(c, dir, make_job(c, dir));
}

TEST_CASE("llama meets the oracle: schedules, split backward, dropout, dp x pp, tied and untied") {
  // Grouped-query attention, RoPE, RMSNorm and SwiGLU through the same executor paths as gpt2: one
  // stage per rank, split backward (I then W) with dropout, local hand-off between virtual stages,
  // the V placement, replicas, and the tied head copy.
  const auto c = GENERATE(Case{2, "1f1b", 4, 4, 0.0, 1, "", false, kLlama},
                          Case{2, "zb-h1", 4, 4, 0.1, 1, "", false, kLlama},
                          Case{2, "interleaved-1f1b", 4, 4, 0.0, 2, "", false, kLlama},
                          Case{2, "zbv", 4, 4, 0.0, 2, "", false, kLlama},
                          Case{2, "1f1b", 3, 4, 0.0, 1, ", data_parallel: 2", false, kLlama},
                          Case{4, "gpipe", 4, 4, 0.1, 1, "", true, kLlama});
  const auto dir = fresh_dir(name_of(c));
  check_parity(c, dir, make_job(c, dir));
}

TEST_CASE("tensor parallelism meets the oracle: every schedule family, gpt2 and llama, dp, bf16 parameters") {
  // pipeline.tensor_parallel 2: every stage's layers split over two ranks (column- and row-parallel linears, the
  // vocabulary-parallel embedding, head and cross-entropy), with sequence parallelism (each rank's half of the
  // sequence between the regions, and on the wire between stages) and without. The dump gathers each gradient whole on every tp rank
  // (the copies must agree bitwise), so a wrong split, a missing all-reduce in f or g, a shard of a norm's gradient
  // counted once per rank, or a vocabulary row off by one fails the comparison with the unsplit reference. With
  // dp, the data-parallel groups run per (tp, pp) coordinate; the distributed optimizer shards each tp rank's
  // shards over them. (bf16 at t > 1 rounds where the split sums: tests/train/test_step.cpp.)
  const std::string tp = ", tensor_parallel: 2";  // sequence parallelism on (the default at t > 1)
  const std::string no_sp = tp + ", sequence_parallel: false";
  const std::string qwen3 = ", arch: qwen3, kv_heads: 2, ffn_hidden: 48";  // per-head q_norm, k_norm over 2 ranks
  const auto c = GENERATE_COPY(Case{2, "1f1b", 4, 4, 0.0, 1, tp}, Case{2, "gpipe", 4, 4, 0.1, 1, tp},
                               Case{2, "1f1b", 4, 4, 0.1, 1, no_sp}, Case{2, "zbv", 4, 4, 0.0, 2, no_sp, false, kLlama},
                               Case{2, "interleaved-1f1b", 4, 4, 0.0, 2, tp}, Case{2, "zb-h1", 4, 4, 0.1, 1, tp},
                               Case{2, "zbv", 4, 4, 0.0, 2, tp},
                               Case{1, "1f1b", 2, 2, 0.0, 1, tp},  // one stage: the head uses the embedding's shard
                               Case{2, "1f1b", 4, 4, 0.0, 1, tp, false, kLlama},
                               Case{2, "zbv", 4, 4, 0.1, 2, tp, true, kLlama},
                               Case{2, "zb-h1", 4, 4, 0.0, 1, tp, false, qwen3},
                               Case{2, "1f1b", 3, 4, 0.0, 1, tp + ", data_parallel: 2", true, "",
                                    ", grad_bucket_size: 2000"},
                               Case{2, "zb-h1", 3, 4, 0.0, 1, tp + ", data_parallel: 2", false, kLlama,
                                    ", grad_bucket_size: 2000", "distributed: true"},
                               Case{2, "interleaved-1f1b", 4, 4, 0.0, 2, tp, true, kLlama});
  const auto dir = fresh_dir(name_of(c) + "_tp2");
  check_parity(c, dir, make_job(c, dir));
}

TEST_CASE("a custom CSV schedule runs and meets the oracle") {
  // The CSV is the 1F1B schedule for p = 2, m = 3 written out by hand in the documented format.
  const Case c{2, "custom", 3, 4, 0.0, 1, ", schedule_file: sched.csv"};
  const auto dir = fresh_dir("custom");
  const auto spec_path = make_job(c, dir);
  test::write_checked(dir / "sched.csv",
                      "# rank 0, then rank 1\n"
                      "0F0,0F1,0B0,0F2,0B1,0B2\n"
                      "1F0,1B0,1F1,1B1,1F2,1B2\n");
  check_parity(c, dir, spec_path);
}

TEST_CASE("the comparison itself detects a wrong gradient") {
  train::GradientMap reference{{"w", torch::tensor({1.0, -2.0, 4.0})}};
  auto close = reference;
  close["w"] = torch::tensor({1.0, -2.0, 4.0 + 1e-7});
  auto wrong = reference;
  wrong["w"] = torch::tensor({1.0, -2.0, 4.01});
  CHECK(train::compare_gradients(close, reference)[0].max_relative_difference <= 1e-5);
  CHECK(train::compare_gradients(wrong, reference)[0].max_relative_difference > 1e-3);
  train::GradientMap missing;
  CHECK_THROWS_AS(train::compare_gradients(missing, reference), Error);
}
