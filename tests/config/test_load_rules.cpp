// Tests for config/load's per-field and cross-field rules: unknown and duplicate keys, types (and the one
// spelling of integers), ranges and the hints they give, enums, and combinations of fields.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "config/job_spec.hpp"
#include "config/load.hpp"
#include "support/load_helpers.hpp"

using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;
using namespace ppctl::config;
using namespace ppctl::config::load_test;

// ------------------------------------------------------------------------------------------------------------
// Unknown and duplicate keys.

TEST_CASE("an unknown key in a section gets a did-you-mean", "[config][keys]") {
  const auto problems = problems_of(with_data("model:\n  layers: 4\n  hiden: 128\n"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "job.yaml:3: model.hiden: unknown key (fix: did you mean 'hidden'?)");
}

TEST_CASE("an unknown key with nothing close lists the valid keys", "[config][keys]") {
  const Message m = only_problem(with_data("model:\n  colour: red\n"));
  check(m, 2, "model.colour", std::nullopt, "unknown key");
  CHECK(m.hint ==
        "valid keys are vocab_size, layers, hidden, heads, seq_len, dropout, tie_embeddings, arch, activation, "
        "norm_eps, rope_theta, ffn_hidden, kv_heads, head_dim, sliding_window, rope_scaling, init_from");
}

TEST_CASE("unknown keys are caught in every section", "[config][keys]") {
  const std::string section = GENERATE("model", "pipeline", "data", "optimizer", "train", "runtime");
  // The data section needs its path; the others get it from with_data.
  const Message m = only_problem(section == "data" ? "data:\n  zzz_unknown: 1\n  path: corpus.txt\n"
                                                   : with_data(section + ":\n  zzz_unknown: 1\n"));
  check(m, 2, section + ".zzz_unknown", std::nullopt, "unknown key");
  CHECK_THAT(m.hint, StartsWith("valid keys are "));
}

TEST_CASE("an unknown top-level section gets a did-you-mean or the list of sections", "[config][keys]") {
  const Message close = only_problem(with_data("modle:\n  layers: 2\n"));
  check(close, 1, "modle", std::nullopt, "unknown key");
  CHECK(close.hint == "did you mean 'model'?");

  const Message far = only_problem(with_data("scheduler: {x: 1}\n"));
  check(far, 1, "scheduler", std::nullopt, "unknown key");
  CHECK(far.hint == "valid sections are model, pipeline, data, optimizer, train, eval, checkpoint, runtime, observe");
}

TEST_CASE("a key of another section says where it belongs", "[config][keys]") {
  const Message in_section = only_problem(with_data("pipeline:\n  stages: 2\n  layers: 8\n"));
  check(in_section, 3, "pipeline.layers", std::nullopt, "unknown key");
  CHECK(in_section.hint == "move it under 'model:' (model.layers)");

  const Message at_top = only_problem(with_data("steps: 10\n"));
  check(at_top, 1, "steps", std::nullopt, "unknown key");
  CHECK(at_top.hint == "move it under 'train:' (train.steps)");
}

TEST_CASE("a duplicate key names the first occurrence", "[config][keys]") {
  const Message key = only_problem(with_data("model:\n  layers: 2\n  layers: 3\n"));
  check(key, 3, "model.layers", std::nullopt, "duplicate key");
  CHECK(key.hint == "keep one of them; the first is on line 2");

  const Message section = only_problem(with_data("train: {steps: 1}\ntrain: {steps: 2}\n"));
  check(section, 2, "train", std::nullopt, "duplicate key");
}

// ------------------------------------------------------------------------------------------------------------
// Types.

TEST_CASE("integer fields reject non-integers", "[config][types]") {
  const std::string path = GENERATE("model.vocab_size", "model.layers", "model.hidden", "model.heads",
                                    "model.seq_len", "pipeline.stages", "pipeline.microbatches",
                                    "pipeline.micro_batch_size", "pipeline.virtual_stages",
                                    "pipeline.microbatch_group_size", "train.steps", "train.seed", "train.log_interval",
                                    "runtime.master_port", "runtime.threads_per_worker");
  struct Case {
    std::string yaml;      // as written after the key
    std::string shown;     // as the message shows it
    std::string hint_has;  // part of the hint
  };
  const Case bad = GENERATE(Case{"four", "\"four\"", "write a whole number such as"},
                            Case{"2.5", "2.5", "use a whole number such as 2 or 3"},
                            Case{"1e3", "1e3", "write it in digits: 1000"},
                            Case{"\"5\"", "\"5\"", "remove the quotes"},
                            Case{"[1, 2]", "[1, 2]", "not a list"},
                            Case{"{}", "{}", "not a mapping"},
                            Case{"", "null", "not an empty value"},
                            Case{"true", "true", "write a whole number such as"},
                            Case{"0x10", "\"0x10\"", "write a whole number such as"});
  const Message m = only_problem(with_data(one_key(path, bad.yaml)));
  check(m, 2, path, bad.shown, "must be an integer");
  CHECK_THAT(m.hint, ContainsSubstring(bad.hint_has));
}

TEST_CASE("a mapping where a number belongs is shown in flow style", "[config][types]") {
  const auto problems = problems_of(with_data("pipeline:\n  stages:\n    n: 2\n"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "job.yaml:2: pipeline.stages: value {n: 2}: must be an integer "
                       "(fix: write one whole number such as 1, not a mapping)");
}

TEST_CASE("the microbatches example: a word where an integer belongs", "[config][types]") {
  const auto problems = problems_of(with_data("model:\n  layers: 4\npipeline:\n  microbatches: four\n"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] == "job.yaml:4: pipeline.microbatches: value \"four\": must be an integer "
                       "(fix: write a whole number such as 1)");
}

TEST_CASE("real-number fields reject non-numbers and non-finite values", "[config][types]") {
  const std::string path = GENERATE("model.dropout", "optimizer.lr", "optimizer.eps", "optimizer.weight_decay",
                                    "runtime.comm_timeout_s");
  struct Case {
    std::string yaml;
    std::string shown;
    std::string rule;
  };
  const Case bad = GENERATE(Case{"small", "\"small\"", "must be a number"},
                            Case{"\"0.5\"", "\"0.5\"", "must be a number"},
                            Case{"[0.5]", "[0.5]", "must be a number"},
                            Case{"", "null", "must be a number"},
                            Case{".nan", ".nan", "must be a finite number"},
                            Case{".inf", ".inf", "must be a finite number"});
  const Message m = only_problem(with_data(one_key(path, bad.yaml)));
  check(m, 2, path, bad.shown, bad.rule);
}

TEST_CASE("betas must be a list of two numbers", "[config][types]") {
  const std::string value = GENERATE("0.9", "[0.9]", "[0.9, 0.95, 0.99]", "[]");
  const Message m = only_problem(with_data("optimizer:\n  betas: " + value + "\n"));
  CHECK(m.line == 2);
  CHECK(m.path == "optimizer.betas");
  CHECK(m.rule == "must be a list of two numbers [beta1, beta2]");
  CHECK(m.hint == "write betas: [0.9, 0.95]");

  const Message element = only_problem(with_data("optimizer:\n  betas:\n    - 0.9\n    - high\n"));
  check(element, 4, "optimizer.betas[1]", "\"high\"", "must be a number");
}

TEST_CASE("master_addr must be a non-empty string", "[config][types]") {
  const std::string value = GENERATE("\"\"", "[a, b]");
  const Message m = only_problem(with_data("runtime:\n  master_addr: " + value + "\n"));
  CHECK(m.line == 2);
  CHECK(m.path == "runtime.master_addr");
  CHECK(m.rule == "must be a non-empty host name or address");
}

TEST_CASE("model.tie_embeddings: true by default, true or false only", "[config][types]") {
  CHECK(parse_ok(with_data("model: {layers: 4}\n")).model.tie_embeddings);
  CHECK_FALSE(parse_ok(with_data("model:\n  tie_embeddings: false\n")).model.tie_embeddings);
  const std::string value = GENERATE("yes", "1", "\"true\"", "True", "[true]");
  const Message m = only_problem(with_data("model:\n  tie_embeddings: " + value + "\n"));
  CHECK(m.line == 2);
  CHECK(m.path == "model.tie_embeddings");
  CHECK(m.rule == "must be true or false");
}

TEST_CASE("a section that is not a mapping", "[config][types]") {
  const Message m = only_problem(with_data("model: 5\n"));
  check(m, 1, "model", "5", "must be a mapping of keys");
  CHECK_THAT(m.hint, ContainsSubstring("valid keys are vocab_size"));
}

TEST_CASE("an integer field given a huge real gets the plain hint (fuzz finding)", "[config]") {
  // 1.7e69 has no int64 neighbours to suggest; converting it was undefined behaviour.
  for (const char* value : {"1777777777777777777777777777777777777777777777777777777777777777777777.7", "-1e300"}) {
    const auto problems = problems_of(with_data(fmt::format("train: {{seed: {}}}\n", value)));
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0], ContainsSubstring("train.seed"));
    CHECK_THAT(problems[0], ContainsSubstring("write a whole number such as"));
  }
}

TEST_CASE("integer fields take one spelling: no '+', no leading zeros, no hex, exponent or fraction",
          "[config]") {
  CHECK(parse_ok(with_data("train: {max_restarts: 3, seed: 0}\n")).train.max_restarts == 3);
  CHECK(parse_ok(with_data("optimizer: {lr: +0.01}\n")).optimizer.lr == 0.01);  // reals: YAML 1.2 floats
  for (const auto& [value, hint] : std::vector<std::pair<std::string, std::string>>{
           {"+3", "write 3"}, {"03", "write 3"}, {"-0", "write 0"}, {"+0", "write 0"}}) {
    const auto m = only_problem(with_data("train: {max_restarts: " + value + "}\n"));
    check(m, 1, "train.max_restarts", value,
          "must be an integer written in plain decimal digits, without a '+' sign or leading zeros");
    CHECK(m.hint == hint);
  }
  for (const auto& [value, hint] : std::vector<std::pair<std::string, std::string>>{
           {"0x3", "write a whole number such as 0"}, {"3e0", "write it in digits: 3"}, {"3.0", "write it in digits: 3"}}) {
    const auto m = only_problem(with_data("train: {max_restarts: " + value + "}\n"));
    check(m, 1, "train.max_restarts", value == "0x3" ? "\"0x3\"" : value, "must be an integer");  // not a number: a string
    CHECK(m.hint == hint);
  }
  // Every integer field goes through the same reader.
  check(only_problem(with_data("pipeline: {stages: +2}\n")), 1, "pipeline.stages", "+2",
        "must be an integer written in plain decimal digits, without a '+' sign or leading zeros");
}

// ------------------------------------------------------------------------------------------------------------
// Ranges.

TEST_CASE("every bounded field rejects values just outside its range", "[config][range]") {
  struct Case {
    std::string path;
    std::string value;
    std::string rule;
  };
  const Case bad = GENERATE(
      Case{"model.vocab_size", "0", "must be in [1, 1000000]"},
      Case{"model.vocab_size", "1000001", "must be in [1, 1000000]"},
      Case{"model.layers", "0", "must be in [1, 10000]"}, Case{"model.layers", "10001", "must be in [1, 10000]"},
      Case{"model.hidden", "0", "must be in [1, 65536]"}, Case{"model.hidden", "65537", "must be in [1, 65536]"},
      Case{"model.heads", "0", "must be in [1, 65536]"}, Case{"model.heads", "65537", "must be in [1, 65536]"},
      Case{"model.seq_len", "0", "must be in [1, 1000000]"},
      Case{"model.seq_len", "1000001", "must be in [1, 1000000]"},
      Case{"model.dropout", "-0.1", "must be in [0, 1)"}, Case{"model.dropout", "1", "must be in [0, 1)"},
      Case{"pipeline.stages", "0", "must be in [1, 1024]"}, Case{"pipeline.stages", "1025", "must be in [1, 1024]"},
      Case{"pipeline.microbatches", "0", "must be in [1, 1000000]"},
      Case{"pipeline.microbatches", "1000001", "must be in [1, 1000000]"},
      Case{"pipeline.micro_batch_size", "-3", "must be in [1, 1000000]"},
      Case{"pipeline.micro_batch_size", "1000001", "must be in [1, 1000000]"},
      Case{"pipeline.virtual_stages", "0", "must be in [1, 64]"},
      Case{"pipeline.virtual_stages", "65", "must be in [1, 64]"},
      Case{"pipeline.microbatch_group_size", "-1", "must be in [0, 1000000]"},
      Case{"pipeline.microbatch_group_size", "1000001", "must be in [0, 1000000]"},
      Case{"optimizer.lr", "0", "must be in (0, 10]"}, Case{"optimizer.lr", "10.5", "must be in (0, 10]"},
      Case{"optimizer.eps", "0", "must be in (0, 1]"}, Case{"optimizer.eps", "1.5", "must be in (0, 1]"},
      Case{"optimizer.weight_decay", "-1", "must be in [0, 10]"},
      Case{"optimizer.weight_decay", "1e999", "must be in [0, 10]"},
      Case{"train.steps", "0", "must be in [1, 1000000000]"},
      Case{"train.steps", "1000000001", "must be in [1, 1000000000]"},
      Case{"train.seed", "-1", "must be in [0, 9223372036854775807]"},
      Case{"train.seed", "9223372036854775808", "must be in [0, 9223372036854775807]"},
      Case{"train.log_interval", "0", "must be in [1, 1000000000]"},
      Case{"train.log_interval", "1000000001", "must be in [1, 1000000000]"},
      Case{"runtime.master_port", "-1", "must be in [0, 65535]"},
      Case{"runtime.master_port", "65536", "must be in [0, 65535]"},
      Case{"runtime.comm_timeout_s", "0", "must be in (0, 86400]"},
      Case{"runtime.comm_timeout_s", "86400.5", "must be in (0, 86400]"},
      Case{"runtime.threads_per_worker", "0", "must be in [1, 1024]"},
      Case{"runtime.threads_per_worker", "1025", "must be in [1, 1024]"});
  const Message m = only_problem(with_data(one_key(bad.path, bad.value)));
  check(m, 2, bad.path, bad.value, bad.rule);
  CHECK_THAT(m.hint, StartsWith("use a value in "));
}

TEST_CASE("betas elements must be at least 0 and below 1", "[config][range]") {
  const Message m = only_problem(with_data("optimizer:\n  betas: [0.9, 1.0]\n"));
  check(m, 2, "optimizer.betas[1]", "1.0", "must be in [0, 1)");
  CHECK(m.hint == "use a value in [0, 1) such as 0.95");
}

TEST_CASE("vocab_size below 256 is rejected for text because the data are bytes, allowed for tokens", "[config][range]") {
  const Message m = only_problem(with_data("model:\n  vocab_size: 100\n"));
  check(m, 2, "model.vocab_size", "100", "must be at least 256 with data.format text (the data are bytes, ids 0..255)");
  CHECK(m.hint == "use vocab_size: 256 or more, or train on tokenized data (data.format tokens or megatron)");
  const JobSpec tokens = parse_ok("model: {vocab_size: 100}\ndata: {format: tokens, dtype: uint32, path: train.bin}\n");
  CHECK(tokens.model.vocab_size == 100);
  REQUIRE(tokens.data.sources.size() == 1);
  CHECK(tokens.data.sources[0].format == ppctl::config::DataFormat::Tokens);
  CHECK(tokens.data.sources[0].dtype == ppctl::config::TokenDType::Uint32);
  CHECK(tokens.data.sources[0].files == std::vector<std::string>{corpus_dir().str() + "/train.bin"});
  CHECK(tokens.data.files.empty());
}

TEST_CASE("hints suggest only values inside the field's range", "[config]") {
  const TempDir dir;
  // An empty or one-byte data file: model.seq_len cannot go below 1, so the only fix is more text.
  for (const std::string text : {std::string(), std::string("a")}) {
    dir.write("short.txt", text);
    const auto m = only_problem("data: {path: short.txt}\n", dir.str());
    CHECK(m.path == "data.path");
    CHECK(m.hint.find("lower model.seq_len") == std::string::npos);
    CHECK(m.hint.find("seq_len 0") == std::string::npos);
    CHECK(m.hint.find("add text") == 0);
  }
  dir.write("three.txt", "abc");
  CHECK(only_problem("data: {path: three.txt}\n", dir.str()).hint == "add text, or lower model.seq_len to 2 or less");
  // model.layers is at most 10,000: 1,024 stages x 64 virtual stages is not a layer count to suggest.
  auto m = only_problem(with_data("model: {layers: 100}\npipeline: {stages: 1024, schedule: interleaved-1f1b, "
                                  "virtual_stages: 64}\n"));
  CHECK(m.path == "pipeline.virtual_stages");
  CHECK(m.hint.find("raise model.layers") == std::string::npos);
  CHECK(m.hint.find("lower pipeline.") != std::string::npos);
  // train.steps is at most 1e9.
  m = only_problem(with_data("optimizer: {lr_schedule: cosine, warmup_steps: 1000000000}\n"));
  CHECK(m.hint == "lower optimizer.warmup_steps to at most 99");
}

// ------------------------------------------------------------------------------------------------------------
// Enums.

TEST_CASE("enum values outside the allowed set list the allowed values", "[config][enum]") {
  struct Case {
    std::string path;
    std::string yaml;
    std::string shown;
    std::string rule;
    std::string hint;
  };
  const Case bad = GENERATE(
      Case{"pipeline.schedule", "pipedream", "\"pipedream\"", kSchedules, "write one of the listed values"},
      Case{"pipeline.schedule", "GPipe", "\"GPipe\"", kSchedules, "did you mean 'gpipe'?"},
      Case{"pipeline.schedule", "[gpipe]", "[gpipe]", kSchedules, "write one of the listed values"},
      Case{"pipeline.schedule", "interleaved", "\"interleaved\"", kSchedules, "did you mean 'interleaved-1f1b'?"},
      Case{"pipeline.schedule", "ZB1P", "\"ZB1P\"", kSchedules, "did you mean 'zb-h1'?"},
      Case{"pipeline.schedule", "zb-v", "\"zb-v\"", kSchedules, "did you mean 'zbv'?"},
      Case{"pipeline.schedule", "zb_auto", "\"zb_auto\"", kSchedules, "did you mean 'zb-auto'?"},
      Case{"runtime.device", "tpu", "\"tpu\"", "must be one of cpu, cuda", "did you mean 'cpu'?"},
      Case{"runtime.device", "gpu", "\"gpu\"", "must be one of cpu, cuda", "did you mean 'cuda'?"},
      Case{"runtime.backend", "mpi", "\"mpi\"", "must be one of auto, gloo, nccl", "write one of the listed values"},
      Case{"runtime.backend", "NCCL", "\"NCCL\"", "must be one of auto, gloo, nccl", "did you mean 'nccl'?"});
  const Message m = only_problem(with_data(one_key(bad.path, bad.yaml)));
  check(m, 2, bad.path, bad.shown, bad.rule);
  CHECK(m.hint == bad.hint);
}

// ------------------------------------------------------------------------------------------------------------
// Combinations.

TEST_CASE("more stages than layers points at pipeline.stages", "[config][combination]") {
  const Message m = only_problem(with_data("model:\n  layers: 2\npipeline:\n  stages: 4\n"));
  check(m, 4, "pipeline.stages", "4", "must not exceed model.layers (2)");
  CHECK(m.hint == "use at most 2 stages, or raise model.layers to 4 or more");

  const Message defaulted = only_problem(with_data("pipeline:\n  stages: 8\n"));
  check(defaulted, 2, "pipeline.stages", "8", "must not exceed model.layers (4)");

  CHECK(parse_ok(with_data("model: {layers: 4}\npipeline: {stages: 4}\n")).pipeline.stages == 4);
}

TEST_CASE("heads must divide hidden", "[config][combination]") {
  const auto problems = problems_of(with_data(R"(# line 1
model:
  vocab_size: 256
  layers: 4
  hidden: 128
  seq_len: 32
  heads: 5
)"));
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] ==
        "job.yaml:7: model.heads: value 5: must divide model.hidden (128) (fix: use a divisor of 128 such as 4 or 8)");

  const Message more_heads_than_width = only_problem(with_data("model: {hidden: 128, heads: 256}\n"));
  check(more_heads_than_width, 1, "model.heads", "256", "must divide model.hidden (128)");
  CHECK(more_heads_than_width.hint == "use a divisor of 128 such as 128");
}

TEST_CASE("a defaulted heads that does not divide hidden points at hidden's line", "[config][combination]") {
  const Message m = only_problem(with_data("model:\n  layers: 2\n  hidden: 130\n"));
  check(m, 3, "model.heads", "4 (default)", "must divide model.hidden (130)");
  CHECK(m.hint == "use a divisor of 130 such as 2 or 5");
}

TEST_CASE("backend nccl needs device cuda", "[config][combination]") {
  const Message m = only_problem(with_data("runtime:\n  device: cpu\n  backend: nccl\n"));
  check(m, 3, "runtime.backend", "\"nccl\"", "needs runtime.device cuda (runtime.device is cpu)");
  CHECK(m.hint == "use backend gloo or auto on cpu, or set runtime.device: cuda");

  const Message defaulted = only_problem(with_data("runtime:\n  backend: nccl\n"));
  check(defaulted, 2, "runtime.backend", "\"nccl\"", "needs runtime.device cuda (runtime.device is cpu, the default)");

  CHECK(parse_ok(with_data("runtime: {device: cuda, backend: nccl}\n")).runtime.backend == Backend::Nccl);
  CHECK(parse_ok(with_data("runtime: {device: cpu, backend: gloo}\n")).runtime.backend == Backend::Gloo);
}

TEST_CASE("p2p_dtype: auto follows precision; bf16 needs precision bf16", "[config][combination]") {
  const auto resolved = [](const std::string& runtime) {
    return p2p_dtype_of(parse_ok(with_data("runtime: {" + runtime + "}\n")).runtime);
  };
  CHECK(resolved("") == P2pDtype::Fp32);
  CHECK(resolved("precision: bf16") == P2pDtype::Bf16);
  CHECK(resolved("precision: bf16, p2p_dtype: auto") == P2pDtype::Bf16);
  CHECK(resolved("precision: bf16, p2p_dtype: fp32") == P2pDtype::Fp32);
  CHECK(resolved("precision: bf16, p2p_dtype: bf16") == P2pDtype::Bf16);
  CHECK(resolved("precision: fp32, p2p_dtype: fp32") == P2pDtype::Fp32);
  CHECK(p2p_element_bytes(parse_ok(with_data("runtime: {precision: bf16}\n")).runtime) == 2);
  CHECK(p2p_element_bytes(parse_ok(with_data("runtime: {precision: fp32}\n")).runtime) == 4);

  const Message m = only_problem(with_data("runtime:\n  precision: fp32\n  p2p_dtype: bf16\n"));
  check(m, 3, "runtime.p2p_dtype", "\"bf16\"", "needs runtime.precision bf16 or bf16-params (runtime.precision is fp32)");
  CHECK(m.hint == "set runtime.precision: bf16, or p2p_dtype auto or fp32");
  const Message defaulted = only_problem(with_data("runtime:\n  p2p_dtype: bf16\n"));
  check(defaulted, 2, "runtime.p2p_dtype", "\"bf16\"",
        "needs runtime.precision bf16 or bf16-params (runtime.precision is fp32, the default)");
  const Message unknown = only_problem(with_data("runtime:\n  p2p_dtype: int8\n"));
  CHECK(unknown.path == "runtime.p2p_dtype");
}

TEST_CASE("a combination is not checked when one of its keys is already wrong", "[config][combination]") {
  check(only_problem(with_data("model: {layers: x}\npipeline: {stages: 8}\n")), 1, "model.layers", "\"x\"",
        "must be an integer");
  check(only_problem(with_data("model: {hidden: 0, heads: 3}\n")), 1, "model.hidden", "0", "must be in [1, 65536]");
  check(only_problem(with_data("model: 7\npipeline: {stages: 8}\n")), 1, "model", "7", "must be a mapping of keys");
  check(only_problem(with_data("runtime: {device: gpu, backend: nccl}\n")), 1, "runtime.device", "\"gpu\"",
        "must be one of cpu, cuda");
}
