// Tests of plan/tp_collectives: the tensor-parallel collectives each stage's F, B and I issue per microbatch
// (Megatron's count, as tests/model/test_tensor_parallel.cpp counts them on the layers: 2 all-reduces each way per
// block without sequence parallelism, all-gather and reduce-scatter pairs with it), recompute and the split
// backward, the embedding and the head, and the time of one collective.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "plan/tp_collectives.hpp"
#include "support/memory_spec.hpp"

using namespace ppctl;
using Catch::Approx;
using Catch::Matchers::ContainsSubstring;

namespace {

/// The shared small GPT-2 spec (hidden 64, seq_len 32, micro_batch_size 2) at tp `t`, or a llama of that size.
config::JobSpec spec_at(int64_t t, bool sequence_parallel, config::Arch arch = config::Arch::Gpt2) {
  auto spec = test::memory_test_spec();
  spec.model.arch = arch;
  spec.pipeline.tensor_parallel = t;
  spec.pipeline.sequence_parallel = sequence_parallel;
  return spec;
}

plan::StageLayout stage_of(int64_t blocks, bool embedding = false, bool head = false) {
  plan::StageLayout stage;
  stage.layers = {0, blocks};
  stage.has_embedding = embedding;
  stage.has_head = head;
  return stage;
}

}  // namespace

TEST_CASE("tp collectives per block: 2 all-reduces each way without sequence parallelism, none at tp 1") {
  const auto none = plan::stage_tp_collectives(spec_at(1, false), stage_of(3, true, true));
  CHECK(none.forward.all_reduce_equivalents(1.0) == 0.0);
  CHECK(none.backward.all_reduce_equivalents(1.0) == 0.0);
  const auto spec = spec_at(2, false, config::Arch::Llama);
  const auto c = plan::stage_tp_collectives(spec, stage_of(3));
  CHECK(c.forward.all_reduces == 6);
  CHECK(c.forward.all_gathers + c.forward.reduce_scatters + c.forward.small_all_reduces == 0);
  CHECK(c.backward.all_reduces == 6);
  CHECK(c.backward.small_all_reduces == 0);  // the norms' gradients are whole on every rank without SP
  // The split backward: I carries the activations' gradients through the regions, W none.
  CHECK(c.input_grad.all_reduces == c.backward.all_reduces);
  CHECK(c.forward.all_reduce_equivalents(plan::tp_activation_bytes(spec)) == 6.0);
}

TEST_CASE("tp collectives per block with sequence parallelism: all-gather and reduce-scatter pairs, the same bytes") {
  for (const auto arch : {config::Arch::Gpt2, config::Arch::Llama}) {
    const auto spec = spec_at(2, true, arch);
    const auto c = plan::stage_tp_collectives(spec, stage_of(1));
    CHECK(c.forward.all_gathers == 2);
    CHECK(c.forward.reduce_scatters == 2);
    CHECK(c.forward.all_reduces == 0);
    CHECK(c.backward.all_gathers == 2);
    CHECK(c.backward.reduce_scatters == 2);
    // The replicated parameters' partial gradients are summed once per step, not per microbatch: none here.
    CHECK(c.backward.small_all_reduces == 0);
    CHECK(c.backward.small_bytes == 0.0);
    // A ring all-reduce is a reduce-scatter then an all-gather: SP's four move what two all-reduces move.
    const double activation = plan::tp_activation_bytes(spec);
    CHECK(c.forward.all_reduce_equivalents(activation) == 2.0);
    CHECK(c.backward.all_reduce_equivalents(activation) == 2.0);
  }
  // qwen3's q and k norms (this rank's heads) are summed once per step too: per microbatch as llama.
  const auto qwen3 = plan::stage_tp_collectives(spec_at(2, false, config::Arch::Qwen3), stage_of(1));
  CHECK(qwen3.backward.small_all_reduces == 0);
  CHECK(qwen3.backward.all_reduces == 2);
}

TEST_CASE("tp collectives under recompute: B and I run the forward's again, F and the count without it do not") {
  for (const bool sp : {false, true}) {
    auto spec = spec_at(4, sp, config::Arch::Llama);
    const auto plain = plan::stage_tp_collectives(spec, stage_of(2, false, true));
    for (const auto mode : {config::Recompute::Full, config::Recompute::Blocks}) {
      spec.train.recompute = mode;
      const auto again = plan::stage_tp_collectives(spec, stage_of(2, false, true));
      CHECK(again.forward.all_reduce_equivalents(1.0) == plain.forward.all_reduce_equivalents(1.0));
      CHECK(again.backward.all_reduces == plain.backward.all_reduces + plain.forward.all_reduces);
      CHECK(again.backward.all_gathers == plain.backward.all_gathers + plain.forward.all_gathers);
      CHECK(again.backward.reduce_scatters == plain.backward.reduce_scatters + plain.forward.reduce_scatters);
      CHECK(again.input_grad.small_all_reduces == plain.input_grad.small_all_reduces + plain.forward.small_all_reduces);
    }
  }
}

TEST_CASE("tp collectives of the embedding and the head: the vocabulary-parallel sums and the loss's small ones") {
  const int64_t t = 2, tokens = 2 * 32;
  const auto ends = plan::stage_tp_collectives(spec_at(t, false), stage_of(0, true, true));
  // Without SP: the embedding's partial rows summed forward; into the LM head, its input's gradient summed
  // backward; the loss: each token's maxima (t values) and its two sums, fp32.
  CHECK(ends.forward.all_reduces == 1);
  CHECK(ends.backward.all_reduces == 1);
  CHECK(ends.forward.small_all_reduces == 2);
  CHECK(ends.forward.small_bytes == tokens * (t + 2) * 4.0);
  CHECK(ends.backward.small_all_reduces == 0);
  // With SP: a reduce-scatter out of the embedding and an all-gather into the head, mirrored backward (the
  // position table's and the final norm's partial gradients are summed once per step, not here).
  const auto sp = plan::stage_tp_collectives(spec_at(t, true), stage_of(0, true, true));
  CHECK(sp.forward.reduce_scatters == 1);
  CHECK(sp.forward.all_gathers == 1);
  CHECK(sp.backward.all_gathers == 1);
  CHECK(sp.backward.reduce_scatters == 1);
  CHECK(sp.backward.small_all_reduces == 0);
  CHECK(sp.backward.small_bytes == 0.0);
  CHECK(sp.forward.small_bytes == tokens * (t + 2) * 4.0);
}

TEST_CASE("one tp all-reduce: the ring's 2(t-1)/t of the activations at the bandwidth, or the given ms by bytes") {
  auto spec = spec_at(4, true);
  spec.runtime.precision = config::Precision::Bf16;
  CHECK(plan::tp_activation_bytes(spec) == 2 * 32 * 64 * 2.0);
  plan::TpCommOptions options;
  options.bandwidth_gbps = 100.0;
  CHECK(plan::tp_all_reduce_ms(spec, options) == Approx(1.5 * 2 * 32 * 64 * 2.0 / 100e9 * 1e3));
  options.collective_ms = 0.5;
  options.given_micro_batch_size = 1;
  CHECK(plan::tp_all_reduce_ms(spec, options) == Approx(1.0));  // micro_batch_size 2: twice the bytes
  spec.pipeline.tensor_parallel = 1;
  CHECK(plan::tp_all_reduce_ms(spec, options) == 0.0);
  // The FLOP model's forward in ms: FLOPs per token x tokens / t at the rate.
  spec.pipeline.tensor_parallel = 2;
  options.tflops = 1.0;
  CHECK(plan::forward_ms(spec, 1e9, options) == Approx(1e9 * 64 / 2 / 1e12 * 1e3));
  CHECK_THAT(plan::describe_tp_collectives(spec, options),
             ContainsSubstring("per block and microbatch F 2 all-gathers + 2 reduce-scatters, B and I 2 all-gathers + "
                               "2 reduce-scatters;") &&
                 ContainsSubstring("--tp-collective-ms 0.5 at micro_batch_size 1"));
}
