// Activation recomputation: gradients with `full` and `blocks` recomputation equal those without it
// and the unpipelined reference (real worker processes, every stage recomputing), and the executor
// really keeps fewer tensors from a forward to its backward.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)

#include <catch2/generators/catch_generators.hpp>

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "config/load.hpp"
#include "core/error.hpp"
#include "job/local_job.hpp"
#include "plan/layout.hpp"
#include "runtime/executor.hpp"
#include "support/temp_dir.hpp"
#include "support/whole_model_step.hpp"
#include "train/oracle.hpp"

namespace fs = std::filesystem;
using namespace ppctl;
using config::Recompute;

namespace {

/// A pipeline to run with each recomputation policy.
struct Pipeline {
  std::string schedule;
  int64_t stages;
  int64_t virtual_stages;
  int64_t microbatches;
  int64_t layers;
  double dropout;
  std::string model = "";  // more model keys, e.g. ", arch: llama, kv_heads: 2"
};

/// train.recompute and train.recompute_every.
struct Policy {
  std::string mode;
  int64_t every = 1;
};

std::string name_of(const Pipeline& p) {
  return fmt::format("{}_p{}_v{}_m{}_l{}_d{}{}", p.schedule, p.stages, p.virtual_stages,
                     p.microbatches, p.layers, p.dropout > 0 ? 1 : 0, p.model.empty() ? "" : "_llama");
}

/// Writes DIR/job.yaml (and its corpus) for one step of `p` under `policy`; returns the spec path.
fs::path write_job(const Pipeline& p, const Policy& policy, const fs::path& dir) {
  std::string corpus;
  for (int i = 0; i < 300; ++i) corpus += fmt::format("recompute {}: pack my box with five dozen liquor jugs\n", i);
  test::write_checked(dir / "corpus.txt", corpus);
  const auto spec = dir / "job.yaml";
  test::write_checked(spec, fmt::format(
      "model: {{layers: {}, hidden: 32, heads: 4, seq_len: 16, dropout: {}{}}}\n"
      "pipeline: {{stages: {}, virtual_stages: {}, schedule: {}, microbatches: {}, "
      "micro_batch_size: 2}}\n"
      "data: {{path: corpus.txt}}\n"
      "train: {{steps: 1, seed: 23, recompute: {}, recompute_every: {}}}\n"
      "runtime: {{comm_timeout_s: 60, threads_per_worker: 1}}\n",
      p.layers, p.dropout, p.model, p.stages, p.virtual_stages, p.schedule, p.microbatches, policy.mode,
      policy.every));
  return spec;
}

/// One pipelined step of the spec at `spec_path` in real worker processes: every gradient and the
/// loss.
train::GradientMap pipelined_gradients(const fs::path& spec_path, const fs::path& dump_dir) {
  const auto spec = config::load_job_spec(spec_path.string());
  fs::create_directories(dump_dir);
  const auto result =
      job::run_local_job(spec, static_cast<int>(spec.pipeline.stages), PPCTL_BINARY,
                         spec_path.string(), {"--dump-gradients", dump_dir.string()});
  REQUIRE(result.exit_code == 0);
  return train::load_gradient_dumps(dump_dir.string(), spec.pipeline.stages);
}

/// Every entry of `actual` within `tolerance` (relative to the largest |expected|) of `expected`.
void check_close(const train::GradientMap& actual, const train::GradientMap& expected,
                 double tolerance) {
  const auto rows = train::compare_gradients(actual, expected);
  // + the last stage's copy of a tied embedding (compared with the shared weight as its own row).
  const size_t copies = actual.count("lm_head.weight") && !expected.count("lm_head.weight") ? 1 : 0;
  REQUIRE(rows.size() == expected.size() + copies);
  for (const auto& row : rows) {
    INFO(row.name);
    CHECK(row.reference_max_abs > 0.0);  // the comparison is not vacuous
    CHECK(row.max_relative_difference <= tolerance);
  }
}

}  // namespace

TEST_CASE("gradients with recomputation equal those without it and the unpipelined ones") {
  const auto p =
      GENERATE(Pipeline{"1f1b", 4, 1, 6, 10, 0.0},   // 3, 3, 2, 2 blocks per stage
               Pipeline{"1f1b", 4, 1, 6, 10, 0.1},   // dropout: the recomputed masks match
               Pipeline{"zb-h1", 4, 1, 6, 10, 0.0},  // split backward: recompute at I
               Pipeline{"interleaved-1f1b", 2, 2, 4, 10, 0.0},  // local stage hand-off
               Pipeline{"zb-h1", 2, 1, 4, 5, 0.1, ", arch: llama, kv_heads: 2"});  // llama, split, dropout
  at::set_num_threads(1);
  INFO(name_of(p));
  const test::TempDir temp("ppctl_recompute_" + name_of(p) + "_");
  const auto& dir = temp.path;
  const auto plain_spec = write_job(p, {"none"}, dir / "none");
  const auto plain = pipelined_gradients(plain_spec, dir / "none" / "dump");
  const auto reference = train::reference_gradients(config::load_job_spec(plain_spec.string()));
  check_close(plain, reference, 1e-6);
  for (const auto& policy : {Policy{"full"}, Policy{"blocks", 1}, Policy{"blocks", 2}}) {
    INFO("recompute " << policy.mode << " every " << policy.every);
    const auto run_dir = dir / fmt::format("{}{}", policy.mode, policy.every);
    const auto grads = pipelined_gradients(write_job(p, policy, run_dir), run_dir / "dump");
    check_close(grads, plain, 1e-6);
    check_close(grads, reference, 1e-6);
  }
}

namespace {

/// One step of a whole model (one stage) on this process under `policy`, GPipe order: every
/// forward before any backward, so all the microbatches' saved tensors are alive at once.
struct InProcessStep {
  runtime::StepResult result;
  train::GradientMap grads;
};

InProcessStep run_in_process(const config::Recompute mode, int64_t every) {
  auto step = test::whole_model_step({256, 4, 32, 4, 64, 0.1}, 4, 4, {mode, every});
  InProcessStep out{step.result, {}};
  for (const auto& item : step.stage->named_parameters()) out.grads[item.key()] = item.value().grad();
  out.grads["__loss__"] = torch::tensor(runtime::step_loss(out.result), torch::kDouble);
  return out;
}

}  // namespace

TEST_CASE("recomputation drops the tensors a forward keeps for its backward") {
  const auto none = run_in_process(Recompute::None, 1);
  const auto blocks1 =
      run_in_process(Recompute::Blocks, 1);  // keeps 5 hidden states per microbatch
  const auto blocks2 = run_in_process(Recompute::Blocks, 2);  // keeps 3
  const auto full = run_in_process(Recompute::Full, 1);       // keeps the token ids only
  for (const auto* step : {&blocks1, &blocks2, &full}) {
    check_close(step->grads, none.grads, 1e-6);
    CHECK(step->result.loss_microbatches == 4);
    CHECK(step->result.loss_count == 4 * 4 * 64);  // every token of 4 microbatches of 4 sequences of 64 is a target
  }
  // Between actions: without recomputation 4 microbatches' whole graphs (about 80 hidden-sized
  // tensors each); with it only the checkpoints (and the token ids and targets).
  const auto kept = [](const InProcessStep& s) { return s.result.kept_bytes; };
  INFO("kept bytes: none " << kept(none) << ", blocks 1 " << kept(blocks1) << ", blocks 2 "
                           << kept(blocks2) << ", full " << kept(full));
  CHECK(kept(full) > 0);
  CHECK(kept(full) < kept(blocks2));
  CHECK(kept(blocks2) < kept(blocks1));
  CHECK(kept(blocks1) * 10 < kept(none));
  CHECK(kept(full) * 100 < kept(none));
  // Every tensor held counts, the .grad buffers (the same in every mode) too.
  CHECK(full.result.held_bytes * 10 < none.result.held_bytes);
  // Inside actions too: a recomputed backward holds one microbatch's graph at most.
  CHECK(full.result.peak_bytes * 2 < none.result.peak_bytes);
  CHECK(blocks1.result.peak_bytes < full.result.peak_bytes);
}

TEST_CASE("a stage runs in segments of parts exactly as a whole") {
  config::ModelSpec spec{256, 4, 32, 4, 16, 0.1};
  model::StageModule whole(spec, model::whole_model_layout(spec), /*seed=*/3);
  REQUIRE(whole->num_parts() == 6);  // embedding, 4 blocks, head
  CHECK(whole->segment_starts(1) == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(whole->segment_starts(2) == std::vector<int64_t>{0, 1, 3, 5});
  CHECK(whole->segment_starts(3) == std::vector<int64_t>{0, 1, 4, 5});
  CHECK(whole->segment_starts(100) == std::vector<int64_t>{0, 1, 5});
  plan::StageLayout middle;
  middle.layers = {1, 4};
  model::StageModule blocks(spec, middle, /*seed=*/3);
  CHECK(blocks->num_parts() == 3);
  CHECK(blocks->segment_starts(2) == std::vector<int64_t>{0, 2});

  const model::DropoutContext ctx{true, 3, 1, 2};
  const auto tokens = torch::randint(0, 256, {2, 16}, torch::kLong);
  const auto expected = whole->forward(tokens, ctx);
  auto x = tokens;
  for (const auto& [begin, end] : {std::pair{0, 2}, std::pair{2, 5}, std::pair{5, 6}}) {
    x = whole->forward_parts(x, begin, end, ctx);
  }
  CHECK(torch::equal(x, expected));  // the same masks, the same operations
  CHECK_THROWS_AS(whole->forward_parts(tokens, 2, 7, ctx), InternalError);
}
