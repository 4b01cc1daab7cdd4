// Tests of plan/layout: uniform partition, parameter formulas, bubble fraction, make_layout.
#include <algorithm>
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "core/error.hpp"
#include "plan/layout.hpp"

using namespace ppctl;
using Catch::Matchers::ContainsSubstring;

namespace {

config::JobSpec spec_with(int64_t layers, int64_t stages, int64_t microbatches = 4) {
  config::JobSpec spec;
  spec.model.vocab_size = 300;
  spec.model.hidden = 8;
  spec.model.heads = 2;
  spec.model.seq_len = 16;
  spec.model.layers = layers;
  spec.pipeline.stages = stages;
  spec.pipeline.microbatches = microbatches;
  spec.source = "job.yaml";
  return spec;
}

}  // namespace

TEST_CASE("partition_uniform: contiguous, covers every layer, sizes differ by at most one") {
  for (int64_t layers = 1; layers <= 40; ++layers) {
    for (int64_t stages = 1; stages <= layers; ++stages) {
      CAPTURE(layers, stages);
      const auto ranges = plan::partition_uniform(layers, stages);
      REQUIRE(static_cast<int64_t>(ranges.size()) == stages);
      REQUIRE(ranges.front().begin == 0);
      REQUIRE(ranges.back().end == layers);
      int64_t sum = 0;
      int64_t smallest = layers;
      int64_t largest = 0;
      for (size_t s = 0; s < ranges.size(); ++s) {
        if (s > 0) REQUIRE(ranges[s].begin == ranges[s - 1].end);
        REQUIRE(ranges[s].size() >= 1);
        if (s > 0) REQUIRE(ranges[s].size() <= ranges[s - 1].size());  // extras go first
        sum += ranges[s].size();
        smallest = std::min(smallest, ranges[s].size());
        largest = std::max(largest, ranges[s].size());
      }
      REQUIRE(sum == layers);
      REQUIRE(largest - smallest <= 1);
    }
  }
}

TEST_CASE("partition_uniform: known uneven splits") {
  const auto ten_by_four = plan::partition_uniform(10, 4);
  REQUIRE(ten_by_four.size() == 4);
  CHECK(ten_by_four[0].begin == 0);
  CHECK(ten_by_four[0].end == 3);
  CHECK(ten_by_four[1].end == 6);
  CHECK(ten_by_four[2].end == 8);
  CHECK(ten_by_four[3].end == 10);

  const auto seven_by_seven = plan::partition_uniform(7, 7);
  for (size_t s = 0; s < 7; ++s) CHECK(seven_by_seven[s].size() == 1);

  const auto one_stage = plan::partition_uniform(5, 1);
  REQUIRE(one_stage.size() == 1);
  CHECK(one_stage[0].begin == 0);
  CHECK(one_stage[0].end == 5);
}

TEST_CASE("partition_uniform: fewer layers than stages, or no stage, is a PlanError") {
  REQUIRE_THROWS_AS(plan::partition_uniform(3, 4), PlanError);
  REQUIRE_THROWS_WITH(plan::partition_uniform(3, 4), ContainsSubstring("3 layers") &&
                                                         ContainsSubstring("4 stages") &&
                                                         ContainsSubstring("fix:"));
  REQUIRE_THROWS_AS(plan::partition_uniform(4, 0), PlanError);
  REQUIRE_THROWS_AS(plan::partition_uniform(0, 1), PlanError);
}

TEST_CASE("parameter formulas match the module shapes") {
  for (int64_t h : {1, 4, 64, 768}) {
    config::ModelSpec model;
    model.hidden = h;
    model.vocab_size = 256;
    model.seq_len = 128;
    CAPTURE(h);
    // Count each module's tensors separately, as torch would list them.
    const int64_t layer_norms = 2 * (h + h);
    const int64_t qkv = h * 3 * h + 3 * h;
    const int64_t proj = h * h + h;
    const int64_t mlp = (h * 4 * h + 4 * h) + (4 * h * h + h);
    CHECK(plan::block_parameters(model) == layer_norms + qkv + proj + mlp);
    CHECK(plan::embedding_parameters(model) == 256 * h + 128 * h);
    CHECK(plan::head_parameters(model) == (h + h) + 256 * h);
  }
  config::ModelSpec gpt2_small;
  gpt2_small.hidden = 768;
  CHECK(plan::block_parameters(gpt2_small) == 7087872);  // GPT-2 small block: 7,087,872
}

TEST_CASE("llama parameter counts equal the published totals of Llama-2 7B and Llama-3 8B") {
  // Total parameters as Hugging Face's LlamaForCausalLM reports them (untied head).
  const auto total = [](const config::ModelSpec& m) {
    return m.layers * plan::block_parameters(m) + plan::embedding_parameters(m) + plan::head_parameters(m);
  };
  config::ModelSpec llama2;
  llama2.arch = config::Arch::Llama;
  llama2.vocab_size = 32000;
  llama2.layers = 32;
  llama2.hidden = 4096;
  llama2.heads = 32;
  llama2.seq_len = 4096;  // no position embedding: does not count
  CHECK(config::ffn_hidden_of(llama2) == 11008);
  CHECK(total(llama2) == 6'738'415'616);
  auto llama3 = llama2;  // grouped-query attention: 8 key/value heads
  llama3.vocab_size = 128256;
  llama3.kv_heads = 8;
  llama3.ffn_hidden = 14336;
  CHECK(total(llama3) == 8'030'261'248);
  // Per module, as torch lists them: 2 RMSNorms, q, k, v, o, gate, up, down.
  config::ModelSpec small = llama2;
  small.hidden = 64;
  small.heads = 8;
  small.kv_heads = 2;
  small.ffn_hidden = 100;
  const int64_t kv = 2 * 8;
  CHECK(plan::block_parameters(small) == 2 * 64 + 64 * 64 + 2 * 64 * kv + 64 * 64 + 3 * 64 * 100);
  CHECK(plan::head_parameters(small) == 64 + 32000 * 64);
}

TEST_CASE("gpt2 parameter counts follow ffn_hidden") {
  config::ModelSpec m;
  m.hidden = 8;
  m.ffn_hidden = 20;
  CHECK(plan::block_parameters(m) == 4 * 8 + (8 * 24 + 24) + (8 * 8 + 8) + (8 * 20 + 20) + (20 * 8 + 8));
}

TEST_CASE("bubble_fraction is (p-1)/(m+p-1)") {
  CHECK(plan::bubble_fraction(1, 1) == 0.0);
  CHECK(plan::bubble_fraction(1, 32) == 0.0);
  CHECK(plan::bubble_fraction(2, 1) == Catch::Approx(0.5));
  CHECK(plan::bubble_fraction(4, 8) == Catch::Approx(3.0 / 11.0));
  CHECK(plan::bubble_fraction(8, 64) == Catch::Approx(7.0 / 71.0));
  CHECK(plan::bubble_fraction(4, 8) > plan::bubble_fraction(4, 16));
  REQUIRE_THROWS_AS(plan::bubble_fraction(0, 4), PlanError);
  REQUIRE_THROWS_AS(plan::bubble_fraction(4, 0), PlanError);
}

TEST_CASE("make_layout: one stage per rank, parameters add up, embedding first, head last") {
  for (int64_t layers : {1, 3, 7, 12}) {
    for (int64_t stages = 1; stages <= layers; ++stages) {
      CAPTURE(layers, stages);
      auto spec = spec_with(layers, stages, 6);
      spec.model.tie_embeddings = false;  // tied counts: the next test
      const plan::Layout layout = plan::make_layout(spec);
      REQUIRE(layout.world_size == stages);
      REQUIRE(layout.num_stages == stages);
      REQUIRE(layout.num_microbatches == 6);
      REQUIRE(static_cast<int64_t>(layout.stages.size()) == stages);
      CHECK(layout.bubble_fraction == Catch::Approx(plan::bubble_fraction(stages, 6)));
      int64_t sum = 0;
      for (const auto& stage : layout.stages) {
        CHECK(stage.rank == stage.stage);
        CHECK(stage.has_embedding == (stage.stage == 0));
        CHECK(stage.has_head == (stage.stage == stages - 1));
        sum += stage.parameters;
      }
      const int64_t whole_model = plan::embedding_parameters(spec.model) +
                                  layers * plan::block_parameters(spec.model) +
                                  plan::head_parameters(spec.model);
      CHECK(sum == whole_model);
      CHECK(layout.total_parameters == whole_model);
    }
  }
}

TEST_CASE("make_layout: known per-stage counts (h=8, vocab 300, seq 16, 5 layers on 2 stages)") {
  const plan::Layout layout = plan::make_layout(spec_with(5, 2));
  // block = 12*64 + 13*8 = 872; embedding = 300*8 + 16*8 = 2528; head = 16 + 300*8 = 2416.
  REQUIRE(layout.stages.size() == 2);
  CHECK(layout.stages[0].layers.size() == 3);
  CHECK(layout.stages[0].parameters == 2528 + 3 * 872);
  CHECK(layout.stages[1].layers.begin == 3);
  CHECK(layout.stages[1].parameters == 2 * 872 + 2416);
}

TEST_CASE("make_layout: a single stage holds embedding and head") {
  const plan::Layout layout = plan::make_layout(spec_with(4, 1));
  REQUIRE(layout.stages.size() == 1);
  CHECK(layout.stages[0].has_embedding);
  CHECK(layout.stages[0].has_head);
  CHECK(layout.bubble_fraction == 0.0);
}

TEST_CASE("make_layout: more stages than layers names the spec fields") {
  REQUIRE_THROWS_AS(plan::make_layout(spec_with(2, 4)), PlanError);
  REQUIRE_THROWS_WITH(plan::make_layout(spec_with(2, 4)),
                      ContainsSubstring("job.yaml") && ContainsSubstring("model.layers = 2") &&
                          ContainsSubstring("pipeline.stages = 4") && ContainsSubstring("fix:"));
}

TEST_CASE("make_layout with tied embeddings: a lone stage shares the weight, the last stage holds a copy") {
  for (int64_t stages : {1, 2, 3}) {
    CAPTURE(stages);
    auto spec = spec_with(3, stages, 4);
    spec.model.tie_embeddings = true;
    auto untied = spec;
    untied.model.tie_embeddings = false;
    const auto tied_layout = plan::make_layout(spec);
    const auto untied_layout = plan::make_layout(untied);
    const int64_t head_weight = spec.model.vocab_size * spec.model.hidden;
    // One weight fewer in the model, whatever the split.
    CHECK(tied_layout.total_parameters == untied_layout.total_parameters - head_weight);
    const int64_t lone = stages == 1 ? head_weight : 0;  // the head reuses tok_embed
    CHECK(tied_layout.stages.back().parameters == untied_layout.stages.back().parameters - lone);
    CHECK(tied_layout.stages.front().parameters == untied_layout.stages.front().parameters - lone);
    // The per-stage counts reconcile with the total: the sum less the one marked copy.
    int64_t sum = 0;
    int64_t copies = 0;
    for (const auto& layout : {tied_layout, untied_layout}) {
      sum = copies = 0;
      for (const auto& stage : layout.stages) {
        sum += stage.parameters;
        copies += stage.tied_copy;
      }
      CHECK(sum - copies == layout.total_parameters);
    }
    CHECK(copies == 0);  // untied: no copy
    CHECK(tied_layout.stages.back().tied_copy == (stages == 1 ? 0 : head_weight));
    CHECK(tied_layout.stages.front().tied_copy == 0);
  }
}
