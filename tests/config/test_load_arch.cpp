// Tests for config/load's model architecture fields: model.arch, its defaults and derived sizes, and the
// fields that belong to one architecture.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <string>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "support/load_helpers.hpp"

using namespace ppctl::config;
using namespace ppctl::config::load_test;

// ------------------------------------------------------------------------------------------------------------
// Model architecture fields (model.arch and the fields that belong to one architecture).

TEST_CASE("model.arch: gpt2 by default; llama unties the head unless tie_embeddings is written", "[config][arch]") {
  const JobSpec gpt2 = parse_ok(with_data("model: {layers: 4}\n"));
  CHECK(gpt2.model.arch == Arch::Gpt2);
  CHECK(gpt2.model.activation == Activation::Gelu);
  CHECK(gpt2.model.norm_eps == 1e-5);
  CHECK(gpt2.model.tie_embeddings);
  const JobSpec llama = parse_ok(with_data("model: {arch: llama, kv_heads: 2, rope_theta: 500000, "
                                           "norm_eps: 1e-6, ffn_hidden: 300}\n"));
  CHECK(llama.model.arch == Arch::Llama);
  CHECK_FALSE(llama.model.tie_embeddings);
  CHECK(llama.model.kv_heads == 2);
  CHECK(llama.model.rope_theta == 500000.0);
  CHECK(llama.model.norm_eps == 1e-6);
  CHECK(llama.model.ffn_hidden == 300);
  CHECK(parse_ok(with_data("model: {arch: llama, tie_embeddings: true}\n")).model.tie_embeddings);
  CHECK(parse_ok(with_data("model: {activation: gelu_tanh}\n")).model.activation == Activation::GeluTanh);
  CHECK(to_string(Arch::Llama) == "llama");
  CHECK(to_string(Activation::GeluTanh) == "gelu_tanh");
}

TEST_CASE("ffn_hidden 0 and kv_heads 0 resolve to each architecture's rule", "[config][arch]") {
  ModelSpec m;
  m.hidden = 128;
  CHECK(ffn_hidden_of(m) == 512);
  m.arch = Arch::Llama;
  // Meta's llama/model.py: int(2 * 4h / 3), rounded up to a multiple of 256.
  CHECK(ffn_hidden_of(m) == 512);   // 341 -> 512
  m.hidden = 4096;
  CHECK(ffn_hidden_of(m) == 11008);  // Llama-2 7B
  m.hidden = 5120;
  CHECK(ffn_hidden_of(m) == 13824);  // Llama-2 13B
  m.hidden = 384;
  CHECK(ffn_hidden_of(m) == 1024);   // exactly 1024: no rounding
  m.ffn_hidden = 300;
  CHECK(ffn_hidden_of(m) == 300);
  m.heads = 8;
  CHECK(kv_heads_of(m) == 8);
  m.kv_heads = 2;
  CHECK(kv_heads_of(m) == 2);
}

TEST_CASE("an unknown model.arch or activation lists the allowed values", "[config][arch][enum]") {
  const Message arch = only_problem(with_data("model:\n  arch: llama3\n"));
  check(arch, 2, "model.arch", "\"llama3\"", "must be one of gpt2, llama, qwen2, qwen3, mistral");
  CHECK(arch.hint == "did you mean 'llama'?");
  const Message other = only_problem(with_data("model:\n  arch: bert\n"));
  check(other, 2, "model.arch", "\"bert\"", "must be one of gpt2, llama, qwen2, qwen3, mistral");
  const Message act = only_problem(with_data("model:\n  activation: gelu_new\n"));
  check(act, 2, "model.activation", "\"gelu_new\"", "must be one of gelu, gelu_tanh");
  CHECK(act.hint == "did you mean 'gelu_tanh'?");
}

TEST_CASE("fields of one architecture are refused for the other", "[config][arch][combination]") {
  const Message act = only_problem(with_data("model:\n  arch: llama\n  activation: gelu\n"));
  check(act, 3, "model.activation", "\"gelu\"", "applies only to model.arch gpt2 (model.arch is llama)");
  CHECK(act.hint == "remove model.activation, or set model.arch: gpt2");
  const Message rope = only_problem(with_data("model:\n  layers: 4\n  rope_theta: 10000\n"));
  check(rope, 3, "model.rope_theta", "10000",
        "applies only to model.arch llama, qwen2, qwen3 or mistral (model.arch is gpt2, the default)");
  const Message kv = only_problem(with_data("model:\n  arch: gpt2\n  kv_heads: 2\n"));
  check(kv, 3, "model.kv_heads", "2", "applies only to model.arch llama, qwen2, qwen3 or mistral (model.arch is gpt2)");
  // A broken arch is reported once, without the combination.
  check(only_problem(with_data("model:\n  arch: x\n  rope_theta: 1e4\n")), 2, "model.arch", "\"x\"",
        "must be one of gpt2, llama, qwen2, qwen3, mistral");
}

TEST_CASE("kv_heads must divide heads, and llama's head size must be even", "[config][arch][combination]") {
  const Message kv = only_problem(with_data("model:\n  arch: llama\n  heads: 4\n  kv_heads: 3\n"));
  check(kv, 4, "model.kv_heads", "3", "must divide model.heads (4)");
  CHECK(kv.hint == "use a divisor of 4 such as 2 or 4, or 0 for kv_heads = heads");
  const Message odd = only_problem(with_data("model:\n  arch: llama\n  hidden: 12\n  heads: 4\n"));
  check(odd, 4, "model.heads", "4",
        "gives an odd head size hidden / heads = 3; rotary embeddings (llama) rotate pairs of features, so it "
        "must be even");
  CHECK(parse_ok(with_data("model: {hidden: 12, heads: 4}\n")).model.heads == 4);  // gpt2: any head size
  const Message hidden = only_problem(with_data("model:\n  arch: llama\n  hidden: 130\n"));
  check(hidden, 3, "model.heads", "4 (default)", "must divide model.hidden (130)");
}

TEST_CASE("tensor_parallel must split heads, kv_heads, the MLP and the vocabulary", "[config][arch][combination]") {
  const Message heads = only_problem(with_data("model: {heads: 6, hidden: 48}\npipeline:\n  tensor_parallel: 4\n"));
  check(heads, 1, "model.heads", "6", "must be a multiple of pipeline.tensor_parallel (4): each tensor-parallel rank "
        "holds whole attention heads");
  // The fix names a size that satisfies every rule at once: 3 would split 6 heads but not the 128 positions.
  CHECK(heads.hint == "use pipeline.tensor_parallel: 2, which splits the heads, the MLP, the vocabulary and the "
                      "sequence alike");
  const Message kv = only_problem(
      with_data("model:\n  arch: llama\n  heads: 8\n  kv_heads: 2\n  hidden: 64\npipeline: {tensor_parallel: 4}\n"));
  check(kv, 4, "model.kv_heads", "2", "must be a multiple of pipeline.tensor_parallel (4): each tensor-parallel rank "
        "holds kv_heads / t key/value heads (ppctl does not replicate key/value heads)");
  const Message ffn = only_problem(with_data("model: {ffn_hidden: 50}\npipeline: {tensor_parallel: 4}\n"));
  check(ffn, 1, "model.ffn_hidden", "50", "must be a multiple of pipeline.tensor_parallel (4): the MLP's columns are "
        "split evenly over the tensor-parallel ranks");
  const Message vocab = only_problem(with_data("model: {vocab_size: 256, heads: 512, hidden: 512}\npipeline: "
                                               "{tensor_parallel: 512, sequence_parallel: false}\n"));
  check(vocab, 1, "model.vocab_size", "256", "is below pipeline.tensor_parallel (512): every tensor-parallel rank "
        "holds at least one vocabulary row");
  const Message seq = only_problem(with_data("model: {seq_len: 30}\npipeline: {tensor_parallel: 4}\n"));
  check(seq, 1, "model.seq_len", "30", "must be a multiple of pipeline.tensor_parallel (4) with "
        "pipeline.sequence_parallel: each rank holds seq_len / t positions of the residual stream");
  CHECK(seq.hint == "use pipeline.tensor_parallel: 2, which splits the heads, the MLP, the vocabulary and the "
                    "sequence alike; or a seq_len that 4 divides, or pipeline.sequence_parallel: false");
  CHECK(parse_ok(with_data("model: {seq_len: 30}\npipeline: {tensor_parallel: 4, sequence_parallel: false}\n"))
            .pipeline.tensor_parallel == 4);
  // Every rule holds: no problem; the default ffn (4 x hidden) splits, and an odd vocabulary is fine (no padding).
  const auto ok = parse_ok(with_data("model: {arch: llama, heads: 8, kv_heads: 4, hidden: 64, vocab_size: 257}\n"
                                     "pipeline: {tensor_parallel: 4}\n"));
  CHECK(ok.pipeline.tensor_parallel == 4);
}

TEST_CASE("the new model fields' ranges", "[config][arch][range]") {
  struct Case {
    std::string yaml;
    std::string path;
    std::string value;
    std::string rule;
  };
  const Case bad = GENERATE(Case{"norm_eps: 0", "model.norm_eps", "0", "must be in (0, 1)"},
                            Case{"norm_eps: 1", "model.norm_eps", "1", "must be in (0, 1)"},
                            Case{"rope_theta: 1", "model.rope_theta", "1", "must be in (1, 1000000000000]"},
                            Case{"ffn_hidden: -1", "model.ffn_hidden", "-1", "must be in [0, 1000000]"},
                            Case{"kv_heads: -1", "model.kv_heads", "-1", "must be in [0, 65536]"});
  const Message m = only_problem(with_data("model:\n  arch: llama\n  " + bad.yaml + "\n"));
  check(m, 3, bad.path, bad.value, bad.rule);
}
