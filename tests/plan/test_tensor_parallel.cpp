// Tests of plan/tensor_parallel: the parameters one tensor-parallel rank holds, counted here from the weight
// shapes of model/tensor_parallel.hpp's layers (each split one cut into t shards), and the tp sizes a model allows.
#include <catch2/catch_test_macros.hpp>

#include "plan/layout.hpp"
#include "plan/tensor_parallel.hpp"

using namespace ppctl;

namespace {

config::ModelSpec gpt2_model() {
  config::ModelSpec m;
  m.arch = config::Arch::Gpt2;
  m.layers = 4;
  m.hidden = 64;
  m.heads = 4;
  m.seq_len = 32;
  m.vocab_size = 257;  // odd: shards of 129 and 128 rows at tp 2
  return m;
}

config::ModelSpec llama_model() {
  config::ModelSpec m;
  m.arch = config::Arch::Llama;
  m.layers = 4;
  m.hidden = 64;
  m.heads = 8;
  m.kv_heads = 2;
  m.ffn_hidden = 96;
  m.seq_len = 32;
  m.vocab_size = 1000;
  return m;
}

}  // namespace

TEST_CASE("a GPT-2 block on one of 2 tp ranks: half of qkv, proj, fc1, fc2; norms and row-parallel biases whole") {
  const auto m = gpt2_model();
  const int64_t h = 64, f = 4 * h, t = 2;
  // Shapes on one tp rank: qkv [3 h/t, h] + bias [3 h/t]; proj [h, h/t] + bias [h] (whole); fc1 [f/t, h] + bias
  // [f/t]; fc2 [h, f/t] + bias [h] (whole); ln1, ln2 weight and bias [h] each.
  const int64_t per_rank = (3 * (h / t) * h + 3 * (h / t)) + (h * (h / t) + h) + ((f / t) * h + f / t) +
                           (h * (f / t) + h) + 4 * h;
  CHECK(plan::block_parameter_split(m).per_rank(t) == per_rank);
  CHECK(plan::block_parameter_split(m).per_rank(1) == plan::block_parameters(m));
  CHECK(plan::block_parameter_split(m).whole() == plan::block_parameters(m));
  // Every rank together holds the whole block plus (t - 1) copies of the replicated 6h.
  CHECK(t * per_rank == plan::block_parameters(m) + (t - 1) * 6 * h);
}

TEST_CASE("a Llama GQA block on one of 2 tp ranks: heads / 2 query heads, kv_heads / 2 key/value heads, ffn / 2") {
  const auto m = llama_model();
  const int64_t h = 64, d = h / 8, f = 96, t = 2;
  // q [4 d, h], k and v [1 d, h] each, o [h, 4 d], gate and up [f/t, h], down [h, f/t]; two RMSNorms [h].
  const int64_t per_rank = (8 / t) * d * h + 2 * (2 / t) * d * h + h * (8 / t) * d + 3 * (f / t) * h + 2 * h;
  CHECK(plan::block_parameter_split(m).per_rank(t) == per_rank);
  CHECK(plan::block_parameter_split(m).per_rank(1) == plan::block_parameters(m));
}

TEST_CASE("the embedding and the head split by vocabulary rows, ceil(vocab / tp) on the largest rank") {
  const auto m = gpt2_model();
  CHECK(plan::vocab_shard_rows(257, 2) == 129);
  CHECK(plan::vocab_shard_rows(128256, 8) == 16032);
  CHECK(plan::vocab_shard_rows(10, 4) == 3);
  // Token rows 129 x h, learned positions seq_len x h whole; the head's LayerNorm 2h whole.
  CHECK(plan::embedding_parameter_split(m).per_rank(2) == 129 * 64 + 32 * 64);
  CHECK(plan::head_parameter_split(m).per_rank(2) == 2 * 64 + 129 * 64);
  CHECK(plan::embedding_parameter_split(m).per_rank(1) == plan::embedding_parameters(m));
  CHECK(plan::head_parameter_split(m).per_rank(1) == plan::head_parameters(m));
}

TEST_CASE("a stage's parameters per tp rank: blocks, ends and the tied embedding's shard") {
  auto m = gpt2_model();
  const auto block = plan::block_parameter_split(m).per_rank(2);
  const auto first = plan::stage_parameters(m, 2, true, false, 2);
  CHECK(first.parameters == 2 * block + 129 * 64 + 32 * 64);
  CHECK(first.tied_copy == 0);
  const auto last = plan::stage_parameters(m, 2, false, true, 2);
  CHECK(last.parameters == 2 * block + 2 * 64 + 129 * 64);
  m.tie_embeddings = true;
  // The last of several stages holds a copy of its tp rank's shard of the embedding.
  CHECK(plan::stage_parameters(m, 2, false, true, 2).tied_copy == 129 * 64);
  // A lone stage shares the one weight: the head adds only its norm.
  const auto lone = plan::stage_parameters(m, 4, true, true, 2);
  CHECK(lone.parameters == 4 * block + 129 * 64 + 32 * 64 + 2 * 64);
  CHECK(lone.tied_copy == 0);
  // tp 1 is the layout's whole stage.
  CHECK(plan::stage_parameters(m, 4, true, true, 1).parameters ==
        4 * plan::block_parameters(m) + plan::embedding_parameters(m) + 2 * 64);
}

TEST_CASE("the tp sizes a model allows: heads, kv_heads, ffn and seq_len divisible, at most 8") {
  config::ModelSpec llama70b;
  llama70b.arch = config::Arch::Llama;
  llama70b.hidden = 8192;
  llama70b.heads = 64;
  llama70b.kv_heads = 8;
  llama70b.ffn_hidden = 28672;
  llama70b.vocab_size = 128256;
  CHECK(plan::tensor_parallel_sizes(llama70b) == std::vector<int64_t>{1, 2, 4, 8});
  CHECK(plan::tensor_parallel_sizes(llama70b, 4) == std::vector<int64_t>{1, 2, 4});
  auto gqa2 = llama70b;
  gqa2.kv_heads = 2;  // key/value heads are not replicated: tp must divide them
  CHECK(plan::tensor_parallel_sizes(gqa2) == std::vector<int64_t>{1, 2});
  config::ModelSpec gpt2_small;  // 12 heads, ffn 3072
  gpt2_small.arch = config::Arch::Gpt2;
  gpt2_small.hidden = 768;
  gpt2_small.heads = 12;
  gpt2_small.vocab_size = 50257;
  gpt2_small.seq_len = 1024;  // sequence parallelism (on by default) splits the sequence too: not by 3 or 6
  CHECK(plan::tensor_parallel_sizes(gpt2_small) == std::vector<int64_t>{1, 2, 4});
  gpt2_small.seq_len = 1536;
  CHECK(plan::tensor_parallel_sizes(gpt2_small) == std::vector<int64_t>{1, 2, 3, 4, 6});
}
