// Tests for the attention of packed conversations (model/block.hpp): the block-diagonal causal mask, the
// cu_seqlens the CUDA variable-length kernel takes, attention over a packed window equal to each conversation's
// attention taken alone, and a stage's microbatch context (positions, rotary tables gathered at them).
#include <catch2/catch_test_macros.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include "config/job_spec.hpp"
#include "model/block.hpp"
#include "model/rope.hpp"
#include "model/stage.hpp"

using namespace ppctl;

TEST_CASE("the block-diagonal causal mask keeps each query to the earlier keys of its own document") {
  const auto documents = torch::tensor({0, 0, 1, 1, 1, -1}, torch::kLong).view({1, 6});
  const auto mask = model::block_causal_mask(documents);
  REQUIRE(mask.sizes() == torch::IntArrayRef({1, 1, 6, 6}));
  const auto m = mask[0][0];
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 6; ++j) {
      const bool same = documents[0][i].item<int64_t>() == documents[0][j].item<int64_t>();
      CHECK(m[i][j].item<bool>() == (same && j <= i));
    }
    CHECK(m[i][i].item<bool>());  // never an empty softmax row, padding included
  }
}

TEST_CASE("cu_seqlens: a segment ends where the document changes or a row ends") {
  const auto documents = torch::tensor({0, 0, 1, 1, 1, -1, 0, 1, 1, 2, -1, -1}, torch::kLong).view({2, 6});
  const auto [offsets, longest] = model::segment_offsets(documents);
  CHECK(offsets.scalar_type() == torch::kInt);
  const std::vector<int32_t> expected{0, 2, 5, 6, 7, 9, 10, 12};
  REQUIRE(offsets.numel() == static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) CHECK(offsets[static_cast<int64_t>(i)].item<int32_t>() == expected[i]);
  CHECK(longest == 3);
  // the same document number on both sides of a row break is two segments
  const auto split = model::segment_offsets(torch::zeros({2, 3}, torch::kLong));
  CHECK(split.first.numel() == 3);
  CHECK(split.second == 3);
}

TEST_CASE("attention over a packed window equals each conversation's causal attention taken alone") {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  const int64_t heads = 2, dim = 8;
  const std::vector<int64_t> lengths{3, 1, 4};  // and 2 positions of padding
  const auto q = torch::randn({1, heads, 10, dim}, gen), k = torch::randn({1, heads, 10, dim}, gen),
             v = torch::randn({1, heads, 10, dim}, gen);
  std::vector<int64_t> docs;
  for (size_t d = 0; d < lengths.size(); ++d) docs.insert(docs.end(), static_cast<size_t>(lengths[d]), static_cast<int64_t>(d));
  docs.insert(docs.end(), 2, -1);
  model::MicrobatchContext context;
  context.attention_mask = model::block_causal_mask(torch::tensor(docs, torch::kLong).view({1, 10}));
  const auto packed = model::attention(q, k, v, context);
  int64_t at = 0;
  for (const auto n : lengths) {
    const auto part = [&](const torch::Tensor& t) { return t.narrow(2, at, n); };
    const auto alone = model::attention(part(q), part(k), part(v), model::MicrobatchContext{});
    CHECK((packed.narrow(2, at, n) - alone).abs().max().item<double>() < 1e-6);
    at += n;
  }
  // the negative control: plain causal attention over the window mixes conversations
  const auto causal = model::attention(q, k, v, model::MicrobatchContext{});
  CHECK((causal.narrow(2, 3, 7) - packed.narrow(2, 3, 7)).abs().max().item<double>() > 1e-3);
}

TEST_CASE("a stage's context gathers the rotary tables at each token's position, once for every block") {
  config::ModelSpec spec{64, 2, 32, 4, 8, 0.0};
  spec.arch = config::Arch::Llama;
  model::StageModule stage(spec, model::whole_model_layout(spec), 3);
  const auto positions = torch::tensor({0, 1, 2, 0, 1, 0, 1, 2}, torch::kLong).view({1, 8});
  const auto documents = torch::tensor({0, 0, 0, 1, 1, 2, 2, 2}, torch::kLong).view({1, 8});
  const auto context = stage->context(model::DropoutContext{false}, positions, documents);
  REQUIRE(context.rope_cos.sizes() == torch::IntArrayRef({1, 1, 8, config::head_dim_of(spec)}));
  const auto [cos, sin] = model::rotary_tables(8, spec, torch::kCPU);
  for (int64_t i = 0; i < 8; ++i) {
    const auto p = positions[0][i].item<int64_t>();
    CHECK(torch::equal(context.rope_cos[0][0][i], cos[p]));
    CHECK(torch::equal(context.rope_sin[0][0][i], sin[p]));
  }
  CHECK(context.attention_mask.defined());
  CHECK_FALSE(context.cu_seqlens.defined());  // the CPU takes the mask
  const auto plain = stage->context(model::DropoutContext{false});
  CHECK(plain.rope_cos.sizes() == torch::IntArrayRef({8, config::head_dim_of(spec)}));
  CHECK_FALSE(plain.attention_mask.defined());
}
