// Tests of plan/memory_estimate: the per-block formulas' closed forms, how they scale, and what each
// recompute mode keeps (the comparison with measured bytes is tests/runtime/test_memory_estimate.cpp).
#include <catch2/catch_test_macros.hpp>

#include <algorithm>

#include "plan/memory_estimate.hpp"
#include "support/memory_spec.hpp"

using namespace ppctl;

namespace {

config::JobSpec gpt2(int64_t micro_batch_size = 2) {
  auto spec = test::memory_test_spec();
  spec.pipeline.micro_batch_size = micro_batch_size;
  return spec;
}

plan::StageLayout middle_stage(int64_t blocks) {
  plan::StageLayout stage;
  stage.layers = {0, blocks};
  return stage;
}

}  // namespace

TEST_CASE("static bytes: fp32 weights, gradients and two AdamW moments, 16 B per parameter (also bf16)") {
  for (const auto precision : {config::Precision::Fp32, config::Precision::Bf16}) {
    const auto b = plan::static_bytes(1000, precision);
    CHECK(b.parameters == 4000);
    CHECK(b.gradients == 4000);
    CHECK(b.optimizer == 8000);
    CHECK(b.total() == 16000);
  }
}

TEST_CASE("static bytes: bf16-params keeps 2 B weights, 4 B gradients and 12 B of fp32 main parameters and moments") {
  const auto b = plan::static_bytes(1000, config::Precision::Bf16Params);
  CHECK(b.parameters == 2000);
  CHECK(b.gradients == 4000);
  CHECK(b.optimizer == 12000);
  CHECK(b.total() == 18000);
}

TEST_CASE("static bytes per parameter equal Megatron-Core's table: 16 | 8 + 8/d, 18 | 6 + 12/d") {
  // docs/source/api-guide/dist_optimizer.md of Megatron-LM: fp32 param / fp32 grads 16 (non-distributed)
  // or 8 + 8/d (distributed); bf16 param / fp32 grads 18 or 6 + 12/d. P divisible by every d (no rounding).
  const int64_t P = 3 * 5 * 7 * 64;
  for (const int64_t d : {1, 2, 3, 4, 8, 16, 64}) {
    INFO("d = " << d);
    for (const auto precision : {config::Precision::Fp32, config::Precision::Bf16}) {
      CHECK(plan::static_bytes(P, precision, d).total() * d == (8 * d + 8) * P);
    }
    const auto b = plan::static_bytes(P, config::Precision::Bf16Params, d);
    CHECK(b.total() * d == (6 * d + 12) * P);
    CHECK(b.parameters + b.gradients == 6 * P);  // never sharded
  }
  CHECK(plan::static_bytes(P, config::Precision::Fp32, 1).total() == 16 * P);
  CHECK(plan::static_bytes(P, config::Precision::Bf16Params, 1).total() == 18 * P);
  // bf16-params pays against fp32 weights only when d > 2: equal at d = 2.
  CHECK(plan::static_bytes(P, config::Precision::Bf16Params, 2).total() ==
        plan::static_bytes(P, config::Precision::Fp32, 2).total());
  CHECK(plan::static_bytes(P, config::Precision::Bf16Params, 3).total() <
        plan::static_bytes(P, config::Precision::Fp32, 3).total());
}

TEST_CASE("static bytes under bf16-params: the tied copies' state stays whole, 12 B each; a shard holds whole elements") {
  const auto bf16_params = config::Precision::Bf16Params;
  CHECK(plan::static_bytes(1000, bf16_params, 4, 100).optimizer == 12 * 100 + 12 * 225);
  CHECK(plan::static_bytes(1000, bf16_params, 4, 100).parameters == 2 * 1000);
  CHECK(plan::static_bytes(1000, bf16_params, 4, 100).gradients == 4 * 1000);
  CHECK(plan::static_bytes(1000, bf16_params, 1, 100).optimizer == 12 * 1000);
  CHECK(plan::static_bytes(1001, bf16_params, 4).optimizer == 12 * 251);
  CHECK(plan::static_bytes(1000, bf16_params, 1000, 1000).optimizer == 12 * 1000);
}

TEST_CASE("a GPT-2 block keeps 16 values per token and hidden unit in fp32 (ffn 4h, no dropout)") {
  const auto spec = gpt2();
  const int64_t t = 2 * 32, h = 64;
  CHECK(plan::block_activation_bytes(spec) == 64 * t * h + 16 * t + 4 * t * 4);
  CHECK(plan::boundary_bytes(spec) == 4 * t * h);
  // Linear in the micro-batch size (no weight copies in fp32).
  CHECK(plan::block_activation_bytes(gpt2(4)) == 2 * plan::block_activation_bytes(spec));
  auto dropout = spec;
  dropout.model.dropout = 0.1;
  CHECK(plan::block_activation_bytes(dropout) == plan::block_activation_bytes(spec) + 2 * 4 * t * h);
}

TEST_CASE("bf16 halves the matrix products' activations and adds the weights' bf16 copies") {
  auto bf16 = gpt2();
  bf16.runtime.precision = config::Precision::Bf16;
  const int64_t t = 2 * 32, h = 64, f = 4 * h;
  const int64_t weight_copies = 2 * (4 * h * h + 2 * h * f);
  CHECK(plan::block_activation_bytes(bf16) == 8 * t * h + 2 * t * (6 * h + 2 * f) + 16 * t + 4 * t * 4 + weight_copies);
  CHECK(plan::block_activation_bytes(bf16) - weight_copies < plan::block_activation_bytes(gpt2()));
  CHECK(plan::head_activation_bytes(bf16) == plan::head_activation_bytes(gpt2()) - 2 * t * h + 2 * 256 * h);
}

TEST_CASE("bf16-params: bf16's activations without the weights' bf16 copies, half-size weight gradients") {
  const int64_t h = 64, v = 256;
  for (const auto arch : {config::Arch::Gpt2, config::Arch::Llama}) {
    INFO("arch " << static_cast<int>(arch));
    auto bf16 = gpt2();
    bf16.model.arch = arch;
    bf16.runtime.precision = config::Precision::Bf16;
    auto params = bf16;
    params.runtime.precision = config::Precision::Bf16Params;
    const int64_t ffn = config::ffn_hidden_of(bf16.model);
    // The block's matrix weights: gpt2 qkv, proj (4 h h), fc1, fc2 (2 h f); llama q, k, v, o
    // (4 h h, no GQA here), gate, up, down (3 h f).
    const int64_t weights = arch == config::Arch::Gpt2 ? 4 * h * h + 2 * h * ffn : 4 * h * h + 3 * h * ffn;
    CHECK(plan::block_activation_bytes(params) == plan::block_activation_bytes(bf16) - 2 * weights);
    CHECK(plan::head_activation_bytes(params) == plan::head_activation_bytes(bf16) - 2 * v * h);
    auto middle = middle_stage(2);
    auto last = middle;
    last.has_head = true;
    // From I until W: the same inputs and output gradients, without the copies.
    CHECK(plan::stage_activation_bytes(params, middle).graph ==
          plan::stage_activation_bytes(bf16, middle).graph - 2 * 2 * weights);
    CHECK(plan::stage_activation_bytes(params, last).graph ==
          plan::stage_activation_bytes(bf16, last).graph - 2 * 2 * weights - 2 * v * h);
    // Kept inputs (recompute full) and what crosses a stage boundary do not depend on the weights.
    params.train.recompute = bf16.train.recompute = config::Recompute::Full;
    CHECK(plan::stage_activation_bytes(params, last).kept == plan::stage_activation_bytes(bf16, last).kept);
    CHECK(plan::boundary_bytes(params) == plan::boundary_bytes(bf16));
    CHECK(plan::p2p_bytes(params) == plan::p2p_bytes(bf16));
    // W: one weight's gradient in bf16 (the weight's type) before AccumulateGrad adds it into fp32.
    CHECK(plan::stage_transient_bytes(bf16, last).weight == 4 * v * h);
    CHECK(plan::stage_transient_bytes(params, last).weight == 2 * v * h);
    CHECK(plan::stage_transient_bytes(params, middle).weight == 2 * h * ffn);
    CHECK(plan::stage_transient_bytes(bf16, middle).forward == plan::stage_transient_bytes(params, middle).forward);
  }
}

TEST_CASE("llama: grouped-query attention keeps as much as multi-head attention (k, v repeated)") {
  auto llama = gpt2();
  llama.model.arch = config::Arch::Llama;
  auto gqa = llama;
  gqa.model.kv_heads = 2;
  // model/llama.cpp repeats k and v to every query head before the attention, which saves them so.
  CHECK(plan::block_activation_bytes(gqa) == plan::block_activation_bytes(llama));
  const int64_t t = 2 * 32, h = 64, f = 256;  // ffn_hidden_of: 2 x 4h / 3 rounded up to 256
  CHECK(plan::block_activation_bytes(llama) == 16 * t * h + 8 * t + 8 * t * h + 4 * t * (4 * h + 4 * f) +
                                                   4 * t * 4 + 8 * 32 * 16);
}

TEST_CASE("recompute modes: full keeps the stage input, blocks every k-th block's input") {
  auto spec = gpt2();
  const auto stage = middle_stage(4);
  const int64_t boundary = plan::boundary_bytes(spec);
  const auto none = plan::stage_activation_bytes(spec, stage);
  CHECK(none.kept == 4 * plan::block_activation_bytes(spec));
  // From I until W each block's four products keep their inputs (3h + f) and output gradients
  // (5h + f), fp32, whatever the recomputation.
  const int64_t t = 2 * 32, h = 64, f = 4 * h;
  CHECK(none.graph == 4 * 4 * t * (8 * h + 2 * f));
  spec.train.recompute = config::Recompute::Full;
  const auto full = plan::stage_activation_bytes(spec, stage);
  CHECK(full.kept == boundary);
  CHECK(full.graph == none.graph);
  spec.train.recompute = config::Recompute::Blocks;
  spec.train.recompute_every = 1;
  CHECK(plan::stage_activation_bytes(spec, stage).kept == 4 * boundary);
  CHECK(plan::stage_activation_bytes(spec, stage).graph == none.graph);
  spec.train.recompute_every = 3;  // runs of 3 and 1
  CHECK(plan::stage_activation_bytes(spec, stage).kept == 2 * boundary);

  // The first stage keeps token ids (8 B each); the last its targets and the head's input.
  auto first = stage;
  first.has_embedding = true;
  auto last = stage;
  last.has_head = true;
  // The first stage's input is token ids: no I, so W keeps the whole graph and its output's
  // gradient, and with recomputation the recomputed output too.
  spec.train.recompute = config::Recompute::None;
  const auto first_none = plan::stage_activation_bytes(spec, first);
  CHECK(first_none.graph == first_none.kept + boundary);
  spec.train.recompute = config::Recompute::Full;
  CHECK(plan::stage_activation_bytes(spec, first).graph == first_none.kept + 2 * boundary);
  CHECK(plan::stage_activation_bytes(spec, first).kept == 8 * 2 * 32);
  CHECK(plan::stage_activation_bytes(spec, last).kept == boundary + 8 * 2 * 32);
  spec.train.recompute = config::Recompute::Blocks;
  spec.train.recompute_every = 2;
  CHECK(plan::stage_activation_bytes(spec, last).kept == 3 * boundary + 8 * 2 * 32);
}

TEST_CASE("tensor parallel without sequence parallelism: a GPT-2 block keeps t h (8 + a (2 + 12 / tp)) + 16 t + "
          "4 t n / tp bytes") {
  // Inside the tp regions (q, k, v, attention output 4h; fc2 input and GELU input 2f = 8h) each rank holds 1/tp;
  // the residual stream into the two LayerNorms (8 t h, fp32) and qkv's and fc1's inputs (2h) stay whole
  // (Korthikanti et al., arXiv 2205.05198 Table 2 without sequence parallelism: 10 + 24 / t in their units).
  const int64_t t = 2 * 32, h = 64, n = 4;
  for (const auto precision : {config::Precision::Fp32, config::Precision::Bf16Params}) {
    auto spec = gpt2();
    spec.runtime.precision = precision;
    spec.pipeline.sequence_parallel = false;
    const int64_t a = precision == config::Precision::Fp32 ? 4 : 2;
    int64_t previous = plan::block_activation_bytes(spec);
    CHECK(previous == t * h * (8 + a * 14) + 16 * t + 4 * t * n);  // tp 1: today's 64 t h in fp32
    for (const int64_t tp : {2, 4}) {
      INFO("precision " << config::to_string(precision) << ", tp " << tp);
      spec.pipeline.tensor_parallel = tp;
      const int64_t bytes = plan::block_activation_bytes(spec);
      CHECK(bytes == t * h * (8 + a * (2 + 12 / tp)) + 16 * t + 4 * t * n / tp);
      CHECK(bytes < previous);
      previous = bytes;
    }
  }
}

TEST_CASE("tensor parallel without sequence parallelism: Llama's split terms divide by tp, the norms and "
          "projection inputs do not") {
  auto spec = gpt2();
  spec.pipeline.sequence_parallel = false;
  spec.model.arch = config::Arch::Llama;
  spec.model.kv_heads = 2;
  spec.runtime.precision = config::Precision::Bf16Params;
  const int64_t t = 2 * 32, h = 64, f = config::ffn_hidden_of(spec.model), n = 4, d = h / n, s = 32;
  const int64_t whole = 16 * t * h + 8 * t + 2 * t * 5 * h + 8 * s * d;  // norms, 5 bf16 casts, rotary tables
  for (const int64_t tp : {1, 2}) {
    INFO("tp " << tp);
    spec.pipeline.tensor_parallel = tp;
    // q and the attention output (h), k' and v' repeated to every query head (h each), gate, SiLU, up, product (4f).
    CHECK(plan::block_activation_bytes(spec) == whole + 2 * t * (4 * h + 4 * f) / tp + 4 * t * n / tp);
  }
}

TEST_CASE("tensor parallel: the head keeps its vocabulary rows' softmax, the logits shrink to ceil(v / tp)") {
  auto spec = gpt2();
  spec.pipeline.sequence_parallel = false;  // the final norm whole (sequence parallelism: the next case)
  spec.model.vocab_size = 257;
  const int64_t t = 2 * 32, h = 64;
  const int64_t whole = plan::head_activation_bytes(spec);
  CHECK(whole == 4 * t * h + 8 * t + 4 * t * h + 4 * t * 257 + 8 * t);
  spec.pipeline.tensor_parallel = 2;
  // 129 rows on tp rank 0; the targets' local index (int64) and mask (bool) 9 t.
  CHECK(plan::head_activation_bytes(spec) == 4 * t * h + 8 * t + 4 * t * h + 4 * t * 129 + 8 * t + 9 * t);
  plan::StageLayout last;
  last.layers = {0, 0};
  last.has_head = true;
  // F with the graph: fp32 logits (4 t v') and the loss's shifted logits beside them (4 t v'); B: the saved
  // softmax's gradient and its clone (8 t v').
  const auto transient = plan::stage_transient_bytes(spec, last);
  CHECK(transient.forward == 8 * t * 129);
  CHECK(transient.backward == 8 * t * 129);
}

TEST_CASE("sequence parallelism: the residual stream, norms, dropout masks and boundary tensors are / tp; the "
          "gathered projection inputs, the rotary tables and the loss's tensors are not") {
  // Korthikanti et al. (arXiv 2205.05198 §4.2.2) split what lies between the tp regions along the sequence; ppctl
  // saves the all-gathered input of the column-parallel products whole (they keep it sharded and gather again).
  const int64_t t = 2 * 32, h = 64, n = 4, s = 32;
  for (const int64_t tp : {2, 4}) {
    INFO("tp " << tp);
    auto spec = gpt2();
    spec.pipeline.tensor_parallel = tp;
    spec.model.dropout = 0.1;
    spec.runtime.precision = config::Precision::Bf16Params;
    const int64_t a = 2;
    // LayerNorm inputs (fp32) and statistics on t / tp tokens; the gathered qkv and fc1 inputs whole; the split
    // terms / tp as without sequence parallelism; the two dropout masks on t / tp tokens.
    CHECK(plan::block_activation_bytes(spec) ==
          8 * t / tp * h + a * t * (2 * h + 12 * h / tp) + 16 * t / tp + 4 * t * n / tp + 2 * a * t / tp * h);
    CHECK(plan::boundary_bytes(spec) == 4 * t / tp * h);
    CHECK(plan::p2p_bytes(spec) == a * t / tp * h);  // p2p dtype auto: bf16 under bf16-params
    // The head: the final norm on t / tp tokens; its gathered input, logits' softmax rows and targets whole.
    spec.model.vocab_size = 257;
    const int64_t v = (257 + tp - 1) / tp;
    CHECK(plan::head_activation_bytes(spec) == 4 * t / tp * h + 8 * t / tp + a * t * h + 4 * t * v + 8 * t + 9 * t);
    // Llama: the norms on t / tp tokens; the five bf16 projection inputs cast from the gathered sequence and the
    // rotary tables whole.
    spec.model.arch = config::Arch::Llama;
    spec.model.kv_heads = 2;
    spec.model.dropout = 0.0;
    const int64_t f = config::ffn_hidden_of(spec.model), d = h / n;
    CHECK(plan::block_activation_bytes(spec) == 16 * t / tp * h + 8 * t / tp + 2 * t * 5 * h + 8 * s * d +
                                                   2 * t * (4 * h + 4 * f) / tp + 4 * t * n / tp);
    // Turning it off brings the whole residual stream back.
    spec.pipeline.sequence_parallel = false;
    CHECK(plan::block_activation_bytes(spec) == 16 * t * h + 8 * t + 2 * t * 5 * h + 8 * s * d +
                                                   2 * t * (4 * h + 4 * f) / tp + 4 * t * n / tp);
    CHECK(plan::boundary_bytes(spec) == 4 * t * h);
  }
  // tp 1: sequence_parallel changes nothing.
  auto one = gpt2();
  one.pipeline.sequence_parallel = true;
  auto off = one;
  off.pipeline.sequence_parallel = false;
  CHECK(plan::block_activation_bytes(one) == plan::block_activation_bytes(off));
  CHECK(plan::p2p_bytes(one) == plan::p2p_bytes(off));
}

TEST_CASE("tensor parallel: a block's forward holds its row-parallel output and the all-reduce's clone") {
  auto spec = gpt2();
  const int64_t t = 2 * 32, h = 64;
  const auto stage = middle_stage(2);
  CHECK(plan::stage_transient_bytes(spec, stage).forward == 4 * t * h);
  spec.pipeline.tensor_parallel = 2;
  CHECK(plan::stage_transient_bytes(spec, stage).forward == 2 * 4 * t * h);
  // The backward's high-water mark: fc2's f/tp-wide gradients (2 x 4 t 128) against f's all-reduce of the fp32
  // gradient of a norm's output and its clone (8 t h = 2 x 4 t 64): the larger.
  CHECK(plan::stage_transient_bytes(spec, stage).backward == std::max(2 * 4 * t * 128, 4 * t * 128 + 4 * h * 128));
  // Under bf16 at tp 4 (f / tp = h): the MLP's 2 x 2 t h and 2 t h + 4 h h are below the all-reduce's 8 t h.
  spec.runtime.precision = config::Precision::Bf16;
  spec.pipeline.tensor_parallel = 4;
  CHECK(plan::stage_transient_bytes(spec, stage).backward == 8 * t * h);
  spec.pipeline.tensor_parallel = 1;  // without tp: the MLP's
  CHECK(plan::stage_transient_bytes(spec, stage).backward == std::max(2 * 2 * t * 256, 2 * t * 256 + 4 * h * 256));
}
