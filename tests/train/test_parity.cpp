// The correctness oracle: gradients of one pipelined step (real worker processes over Gloo) equal
// those of one unpipelined process over the same global batch, for every schedule and stage count.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/serialize.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "comm/rendezvous.hpp"
#include "config/load.hpp"
#include "launch/launcher.hpp"
#include "model/gpt.hpp"
#include "train/microbatches.hpp"

namespace fs = std::filesystem;
using namespace ppctl;

namespace {

struct Case {
  int64_t stages;
  std::string schedule;
  int64_t microbatches;
  int64_t layers;
  double dropout;
};

fs::path make_job(const Case& c, const fs::path& dir) {
  fs::create_directories(dir);
  {
    std::ofstream text(dir / "corpus.txt");
    for (int i = 0; i < 400; ++i) text << "line " << i << ": the quick brown fox jumps over the lazy dog\n";
  }
  const auto spec = dir / "job.yaml";
  std::ofstream out(spec);
  out << fmt::format(R"(model: {{layers: {}, hidden: 32, heads: 4, seq_len: 16, dropout: {}}}
pipeline: {{stages: {}, schedule: {}, microbatches: {}, micro_batch_size: 2}}
data: {{path: corpus.txt}}
train: {{steps: 1, seed: 17}}
runtime: {{comm_timeout_s: 60, threads_per_worker: 1}}
)",
                     c.layers, c.dropout, c.stages, c.schedule, c.microbatches);
  return spec;
}

/// Runs one pipelined step in real worker processes; returns every parameter's gradient by name
/// and the loss reported by the last stage under "__loss__".
std::map<std::string, torch::Tensor> pipelined_gradients(const fs::path& spec, int64_t stages,
                                                         const fs::path& dump_dir) {
  fs::create_directories(dump_dir);
  comm::StoreServer store("127.0.0.1", 0, static_cast<int>(stages), std::chrono::seconds(60));
  launch::LaunchOptions options;
  options.world_size = static_cast<int>(stages);
  options.argv = {PPCTL_BINARY, "worker", spec.string(), "--dump-gradients", dump_dir.string()};
  options.master_port = store.port();
  const auto result = launch::run_workers(options);
  REQUIRE(result.exit_code == 0);
  std::map<std::string, torch::Tensor> grads;
  for (int64_t r = 0; r < stages; ++r) {
    std::ifstream in(dump_dir / fmt::format("rank{}.pt", r), std::ios::binary);
    REQUIRE(in.good());
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto dict = torch::pickle_load(bytes).toGenericDict();
    for (const auto& item : dict) {
      const auto name = item.key().toStringRef();
      REQUIRE(grads.count(name) == 0);  // each parameter lives on exactly one stage
      grads[name] = item.value().toTensor();
    }
  }
  return grads;
}

/// One process, no pipeline: the whole model, gradients accumulated over the same m microbatches.
std::map<std::string, torch::Tensor> reference_gradients(const config::JobSpec& spec) {
  model::StageModule whole(spec.model, model::whole_model_layout(spec.model), spec.train.seed);
  data::TextDataset dataset(spec.data.files, spec.model.seq_len, spec.train.seed);
  double loss_sum = 0.0;
  for (int64_t j = 0; j < spec.pipeline.microbatches; ++j) {
    const auto batch = train::microbatch(dataset, spec, 0, j);
    model::DropoutContext ctx{true, spec.train.seed, 0, j};
    auto loss = whole->loss(whole->forward(batch.tokens, ctx), batch.targets);
    loss_sum += loss.item<double>();
    (loss / static_cast<double>(spec.pipeline.microbatches)).backward();
  }
  std::map<std::string, torch::Tensor> grads;
  for (const auto& item : whole->named_parameters()) grads[item.key()] = item.value().grad();
  grads["__loss__"] = torch::tensor(loss_sum / static_cast<double>(spec.pipeline.microbatches),
                                    torch::kDouble);
  return grads;
}

double max_relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-12);
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>() / scale;
}

}  // namespace

TEST_CASE("pipelined gradients equal unpipelined gradients (1F1B and GPipe, 2 and 4 stages)") {
  at::set_num_threads(1);
  const auto c = GENERATE(Case{2, "1f1b", 4, 4, 0.0}, Case{2, "gpipe", 4, 4, 0.0},
                          Case{4, "1f1b", 6, 5, 0.0}, Case{4, "gpipe", 6, 5, 0.0},
                          Case{4, "1f1b", 2, 4, 0.0},   // fewer microbatches than stages
                          Case{4, "1f1b", 1, 4, 0.0},   // a single microbatch
                          Case{2, "1f1b", 3, 3, 0.1});  // dropout on: masks seeded per (step, mb, layer)
  const auto dir = fs::temp_directory_path() /
                   fmt::format("ppctl_parity_{}_{}_{}_{}_{}", c.stages, c.schedule, c.microbatches,
                               c.layers, c.dropout > 0 ? 1 : 0);
  fs::remove_all(dir);
  const auto spec_path = make_job(c, dir);
  const auto spec = config::load_job_spec(spec_path.string());
  INFO("stages " << c.stages << ", " << c.schedule << ", m " << c.microbatches << ", layers "
                 << c.layers << ", dropout " << c.dropout);

  const auto pipelined = pipelined_gradients(spec_path, c.stages, dir / "dump");
  const auto reference = reference_gradients(spec);
  REQUIRE(pipelined.size() == reference.size());
  for (const auto& [name, expected] : reference) {
    INFO(name);
    REQUIRE(pipelined.count(name) == 1);
    REQUIRE(expected.defined());
    CHECK(expected.abs().max().item<double>() > 0.0);  // the comparison is not vacuous
    CHECK(max_relative_difference(pipelined.at(name), expected) <= 1e-5);
  }
}
