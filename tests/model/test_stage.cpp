// Tests for model/stage: for every architecture, parameter counts match plan/, weights and dropout masks
// do not depend on the partition, and stages composed in order compute what the whole model computes.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>

#include <ATen/Parallel.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "model/stage.hpp"
#include "plan/layout.hpp"
#include "support/temp_dir.hpp"

using namespace ppctl;

namespace {

/// Every architecture, for GENERATE.
const auto kArchs = {config::Arch::Gpt2, config::Arch::Llama};

/// A small model of `arch`; llama with grouped-query attention (2 key/value heads for 4 query heads).
config::JobSpec tiny_spec(int64_t layers, int64_t stages, double dropout, config::Arch arch = config::Arch::Gpt2) {
  config::JobSpec spec;
  spec.model.arch = arch;
  if (arch == config::Arch::Llama) spec.model.kv_heads = 2;
  spec.model.layers = layers;
  spec.model.hidden = 32;
  spec.model.heads = 4;
  spec.model.seq_len = 16;
  spec.model.dropout = dropout;
  spec.pipeline.stages = stages;
  return spec;
}

std::vector<model::StageModule> build_stages(const config::JobSpec& spec, uint64_t seed) {
  std::vector<model::StageModule> stages;
  for (const auto& s : plan::make_layout(spec).stages) stages.emplace_back(spec.model, s, seed);
  return stages;
}

std::map<std::string, torch::Tensor> params_of(const std::vector<model::StageModule>& stages) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& stage : stages) {
    for (const auto& item : stage->named_parameters()) {
      REQUIRE(out.count(item.key()) == 0);  // names are global: no two stages share one
      out[item.key()] = item.value();
    }
  }
  return out;
}

int64_t numel(const std::vector<model::StageModule>& stages) {
  int64_t n = 0;
  for (const auto& stage : stages)
    for (const auto& p : stage->parameters()) n += p.numel();
  return n;
}

}  // namespace

TEST_CASE("parameter counts equal plan/'s formulas, per stage and in total") {
  const auto arch = GENERATE(values(kArchs));
  for (int64_t stages : {1, 2, 3}) {
    auto spec = tiny_spec(5, stages, 0.0, arch);
    spec.model.tie_embeddings = false;  // tied: the next test
    const auto layout = plan::make_layout(spec);
    const auto built = build_stages(spec, 1);
    for (size_t s = 0; s < built.size(); ++s) {
      int64_t n = 0;
      for (const auto& p : built[s]->parameters()) n += p.numel();
      CHECK(n == layout.stages[s].parameters);
    }
    CHECK(numel(built) == layout.total_parameters);
  }
}

TEST_CASE("tied embeddings: one weight in one stage, an identical copy on the last of several") {
  const auto arch = GENERATE(values(kArchs));
  for (int64_t stages : {1, 2, 3}) {
    CAPTURE(stages);
    const auto spec = tiny_spec(5, stages, 0.0, arch);
    REQUIRE(spec.model.tie_embeddings);  // the default
    const auto layout = plan::make_layout(spec);
    const auto built = build_stages(spec, 1);
    int64_t copies = 0;
    for (size_t s = 0; s < built.size(); ++s) {
      int64_t n = 0;
      for (const auto& p : built[s]->parameters()) n += p.numel();
      CHECK(n == layout.stages[s].parameters);
      if (built[s]->has_head() && built[s]->tied_weight().defined()) copies += built[s]->tied_weight().numel();
    }
    CHECK(numel(built) - copies == layout.total_parameters);
    const auto params = params_of(built);
    CHECK(params.count("lm_head.weight") == (stages > 1 ? 1u : 0u));
    CHECK(built.front()->tied_weight().defined() == (stages > 1));
    if (stages > 1) {
      CHECK(torch::equal(params.at("lm_head.weight"), params.at("tok_embed.weight")));
      CHECK(built.back()->tied_weight().is_same(params.at("lm_head.weight")));
    }
  }
  // Untied, the head has its own, different initialisation.
  auto untied = tiny_spec(4, 2, 0.0, arch);
  untied.model.tie_embeddings = false;
  const auto params = params_of(build_stages(untied, 1));
  CHECK_FALSE(torch::equal(params.at("lm_head.weight"), params.at("tok_embed.weight")));
  CHECK_FALSE(build_stages(untied, 1).back()->tied_weight().defined());
}

TEST_CASE("initial weights depend on the seed and the global layer only, not the partition") {
  const auto arch = GENERATE(values(kArchs));
  const auto whole = params_of(build_stages(tiny_spec(4, 1, 0.0, arch), 5));
  for (int64_t stages : {2, 4}) {
    const auto split = params_of(build_stages(tiny_spec(4, stages, 0.0, arch), 5));
    REQUIRE(split.size() == whole.size() + 1);  // + the last stage's copy of the tied embedding
    for (const auto& [name, tensor] : whole) {
      INFO(name << " with " << stages << " stages");
      CHECK(torch::equal(split.at(name), tensor));
    }
  }
  const auto reseeded = params_of(build_stages(tiny_spec(4, 1, 0.0, arch), 6));
  const std::string first = arch == config::Arch::Llama ? "q_proj.weight" : "qkv.weight";
  CHECK_FALSE(torch::equal(reseeded.at("block0." + first), whole.at("block0." + first)));
  CHECK_FALSE(torch::equal(whole.at("block0." + first).slice(0, 0, 32),
                           whole.at("block1." + first).slice(0, 0, 32)));
}

TEST_CASE("stages run in order equal the whole model, with and without dropout") {
  at::set_num_threads(1);
  const auto arch = GENERATE(values(kArchs));
  for (double dropout : {0.0, 0.2}) {
    const auto spec4 = tiny_spec(4, 4, dropout, arch);
    auto whole = build_stages(tiny_spec(4, 1, dropout, arch), 3);
    auto parts = build_stages(spec4, 3);
    auto tokens = torch::randint(0, 256, {2, 16}, torch::kLong);
    model::DropoutContext ctx{true, 9, 2, 1};
    auto expected = whole[0]->forward(tokens, ctx);
    torch::Tensor x = tokens;
    for (auto& part : parts) x = part->forward(x, ctx);
    INFO("dropout " << dropout);
    REQUIRE(x.sizes() == expected.sizes());
    CHECK(torch::allclose(x, expected, 1e-6, 1e-6));
    if (dropout > 0) {  // a different microbatch draws different masks
      model::DropoutContext other = ctx;
      other.microbatch = 2;
      CHECK_FALSE(torch::allclose(whole[0]->forward(tokens, other), expected, 1e-6, 1e-6));
    }
  }
}

TEST_CASE("shapes, and the loss at initialisation is close to ln(vocab)") {
  const auto spec = tiny_spec(2, 2, 0.0, GENERATE(values(kArchs)));
  auto parts = build_stages(spec, 0);
  auto tokens = torch::randint(0, 256, {3, 16}, torch::kLong);
  model::DropoutContext ctx;
  auto hidden = parts[0]->forward(tokens, ctx);
  CHECK(hidden.sizes() == torch::IntArrayRef({3, 16, 32}));
  auto logits = parts[1]->forward(hidden, ctx);
  CHECK(logits.sizes() == torch::IntArrayRef({3, 16, 256}));
  const double loss = parts[1]->loss(logits, torch::randint(0, 256, {3, 16}, torch::kLong)).item<double>();
  CHECK_THAT(loss, Catch::Matchers::WithinAbs(std::log(256.0), 0.1));
}

TEST_CASE("the standard library's std::filesystem is used in torch-linked binaries") {
  // libtorch.so exports its own std::filesystem symbols; one of them (remove_all) crashed when the
  // dynamic linker picked it. The build puts libstdc++ first; this fails if that order is lost.
  namespace fs = std::filesystem;
  const ppctl::test::TempDir temp("ppctl_fs_link_test_");
  const auto dir = temp.path / "tree";
  fs::create_directories(dir / "a" / "b");
  std::ofstream(dir / "a" / "b" / "file.txt") << "x";
  CHECK(fs::remove_all(dir) == 4);
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("bf16 mixed precision: bf16 arithmetic, fp32 weights, gradients and logits, close to fp32") {
  at::set_num_threads(1);
  const auto spec = tiny_spec(2, 1, 0.0, GENERATE(values(kArchs)));
  auto fp32 = build_stages(spec, 5)[0];
  auto bf16 = build_stages(spec, 5)[0];
  bf16->set_precision(config::Precision::Bf16);
  const auto tokens = torch::randint(0, 256, {2, 16}, torch::kLong);
  const auto targets = torch::randint(0, 256, {2, 16}, torch::kLong);
  model::DropoutContext ctx;

  const auto logits32 = fp32->forward(tokens, ctx);
  const auto logits16 = bf16->forward(tokens, ctx);
  CHECK(logits16.scalar_type() == torch::kFloat);  // the loss is computed in fp32
  CHECK_FALSE(torch::equal(logits16, logits32));   // the arithmetic really was bf16 ...
  CHECK(torch::allclose(logits16, logits32, 0.0, 0.05));  // ... and close to fp32

  fp32->loss(logits32, targets).backward();
  bf16->loss(logits16, targets).backward();
  const auto a = params_of({fp32});
  const auto b = params_of({bf16});
  for (const auto& [name, param] : b) {
    INFO(name);
    CHECK(param.scalar_type() == torch::kFloat);  // master weights
    REQUIRE(param.grad().defined());
    CHECK(param.grad().scalar_type() == torch::kFloat);  // fp32 gradient accumulation
    const auto reference = a.at(name).grad();
    const double scale = reference.abs().max().item<double>();
    CHECK((param.grad() - reference).abs().max().item<double>() <= 0.1 * scale + 1e-6);
  }
  // The guard restores the state: outside a bf16 forward nothing is autocast.
  CHECK(torch::matmul(torch::ones({2, 2}), torch::ones({2, 2})).scalar_type() == torch::kFloat);
}
