// Tests for observe/metrics: Megatron's FLOPs formula against a hand count, the known-GPU table, MFU,
// and metrics.jsonl lines parsed back.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "observe/metrics.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace ppctl::observe;

TEST_CASE("model FLOPs per step follow Megatron's formula without recomputation", "[observe][metrics]") {
  ppctl::config::ModelSpec m;
  m.layers = 2;
  m.hidden = 4;
  m.seq_len = 8;
  m.vocab_size = 16;
  const int64_t b = 3;
  // Counted by hand, forward, per block: QKV 3 x 2bsh^2, attention scores and values 2 x 2bs^2h,
  // projection 2bsh^2, MLP 2 x 2bs(4h)h = 24bsh^2 + 4bs^2h = 9216 + 3072; the LM head 2bshV = 3072.
  const double forward = 2 * (24.0 * b * 8 * 4 * 4 + 4.0 * b * 8 * 8 * 4) + 2.0 * b * 8 * 4 * 16;
  CHECK(forward == 27648.0);
  // Backward is twice the forward: three forwards' worth in all.
  CHECK(model_flops_per_step(m, b) == Catch::Approx(3 * forward).epsilon(1e-12));
  CHECK(model_flops_per_step(m, 2 * b) == Catch::Approx(2 * 3 * forward).epsilon(1e-12));

  // The example job (4 blocks, hidden 128, seq 128, vocab 256, global batch 64 sequences).
  ppctl::config::ModelSpec example;
  example.layers = 4;
  example.hidden = 128;
  example.seq_len = 128;
  example.vocab_size = 256;
  const double per_block = 24.0 * 64 * 128 * 128 * 128 + 4.0 * 64 * 128 * 128 * 128;
  const double head = 2.0 * 64 * 128 * 128 * 256;
  CHECK(model_flops_per_step(example, 64) == Catch::Approx(3 * (4 * per_block + head)).epsilon(1e-12));
}

TEST_CASE("gpt2 FLOPs are Megatron's eq. 3 without recomputation", "[observe][metrics]") {
  ppctl::config::ModelSpec m;
  m.layers = 12;
  m.hidden = 768;
  m.seq_len = 1024;
  m.vocab_size = 50257;
  const double b = 8, s = 1024, l = 12, h = 768, v = 50257;
  const double eq3 = 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h));  // arXiv 2104.04473
  CHECK(model_flops_per_step(m, 8) == Catch::Approx(eq3).epsilon(1e-12));
}

TEST_CASE("llama FLOPs: three SwiGLU matrices, grouped-query k and v", "[observe][metrics]") {
  ppctl::config::ModelSpec m;
  m.arch = ppctl::config::Arch::Llama;
  m.layers = 3;
  m.hidden = 16;
  m.heads = 4;
  m.kv_heads = 1;  // k and v 4 wide each
  m.ffn_hidden = 40;
  m.seq_len = 8;
  m.vocab_size = 300;
  const double bs = 2.0 * 8;
  // By hand, forward per block: q 2bs 16 16, k and v 2bs 16 4 each, o 2bs 16 16; scores and values
  // 2 x 2 b s^2 16; gate, up, down 2bs 16 40 each. Logits 2bs 16 300.
  const double block = 2 * bs * (256 + 64 + 64 + 256) + 4 * bs * 8 * 16 + 3 * 2 * bs * 640;
  const double logits = 2 * bs * 16 * 300;
  CHECK(model_flops_per_step(m, 2) == Catch::Approx(3 * (3 * block + logits)).epsilon(1e-12));
  m.kv_heads = 4;  // multi-head: more k and v work
  CHECK(model_flops_per_step(m, 2) > 3 * (3 * block + logits));
}

TEST_CASE("known GPUs by their CUDA names; unknown names give no peak", "[observe][metrics]") {
  double bf16 = 0;
  CHECK(known_peak_tflops("NVIDIA H100 80GB HBM3", &bf16) == Catch::Approx(66.9));
  CHECK(bf16 == Catch::Approx(989.4));
  CHECK(known_peak_tflops("NVIDIA H100 PCIe") == Catch::Approx(51.2));
  CHECK(known_peak_tflops("NVIDIA H200") == Catch::Approx(66.9));
  CHECK(known_peak_tflops("NVIDIA A100-SXM4-80GB") == Catch::Approx(19.5));
  CHECK_FALSE(known_peak_tflops("Some Future GPU").has_value());
}

TEST_CASE("metrics.jsonl lines parse back with every field; MFU only with a peak", "[observe][metrics]") {
  const ppctl::test::TempDir dir("ppctl_metrics_test_");
  const fs::path file = dir.path / "metrics.jsonl";

  StepMetrics m;
  m.step = 3;
  m.steps = 20;
  m.loss = 2.5;
  m.lr = 1e-3;
  m.grad_norm = 0.75;
  m.step_time_s = 0.5;
  m.tokens = 8192;
  m.model_flops = 4e12;
  m.devices = 4;
  m.peak_tflops = 10.0;
  m.peak_memory_bytes = 123456789;
  m.elapsed_s = 1.5;
  StepMetrics no_peak = m;
  no_peak.step = 4;
  no_peak.peak_tflops.reset();
  no_peak.loss = std::nan("");
  no_peak.skipped = true;
  {
    JsonlWriter writer(file.string());
    writer.write(metrics_json_line(m));
    writer.write(metrics_json_line(no_peak));
    RunSummary summary{20, {100, 200}, {{0, 3}, {1, 2}}, "cpu max resident set", std::nullopt};
    summary.ranks = {0, 2};  // dp 2: replica 0's pipeline ranks are global ranks 0 and 2
    writer.write(metrics_end_line(summary));
    summary.bubbles = BubbleReport{{0.5, 0.25}, {0.2, 0.2}, {0.3, 0.1}, 12.5, 10.0};
    writer.write(metrics_end_line(summary));
  }
  std::ifstream in(file);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(lines.size() == 4);

  const auto& a = lines[0];
  CHECK(a["event"] == "step");
  CHECK(a["step"] == 3);
  CHECK(a["steps"] == 20);
  CHECK(a["loss"] == 2.5);
  CHECK(a["lr"] == 1e-3);
  CHECK(a["grad_norm"] == 0.75);
  CHECK(a["skipped"] == false);
  CHECK(a["step_time_s"] == 0.5);
  CHECK(a["tokens"] == 8192);
  CHECK(a["tokens_per_s"].get<double>() == Catch::Approx(16384.0));
  CHECK(a["model_flops"] == 4e12);
  // 4e12 FLOPs in 0.5 s over 4 devices: 2 TFLOP/s each, 20% of a 10 TFLOP/s peak.
  CHECK(a["tflops"].get<double>() == Catch::Approx(2.0));
  CHECK(a["peak_tflops"] == 10.0);
  CHECK(a["mfu"].get<double>() == Catch::Approx(0.2));
  CHECK(a["peak_memory_bytes"] == 123456789);
  CHECK(a["elapsed_s"] == 1.5);

  const auto& b = lines[1];
  CHECK(b["step"] == 4);
  CHECK(b["loss"].is_null());
  CHECK(b["skipped"] == true);
  CHECK(b["peak_tflops"].is_null());
  CHECK(b["mfu"].is_null());
  CHECK(b["tflops"].get<double>() == Catch::Approx(2.0));

  const auto& end = lines[2];
  CHECK(end["event"] == "end");
  CHECK(end["peak_memory_bytes"] == nlohmann::json::array({100, 200}));
  CHECK(end["stages"] == nlohmann::json::parse("[[0, 3], [1, 2]]"));
  CHECK(end["ranks"] == nlohmann::json::array({0, 2}));
  CHECK(end["memory_kind"] == "cpu max resident set");
  CHECK(end["bubble_measured"].is_null());
  CHECK(end["step_ms_simulated"].is_null());
  const auto& timed = lines[3];
  CHECK(timed["bubble_measured"] == nlohmann::json::array({0.5, 0.25}));
  CHECK(timed["bubble_planned"] == nlohmann::json::array({0.2, 0.2}));
  CHECK(timed["bubble_simulated"] == nlohmann::json::array({0.3, 0.1}));
  CHECK(timed["step_ms_measured"] == 12.5);
  CHECK(timed["step_ms_simulated"] == 10.0);
}

TEST_CASE("a metrics file that cannot be created is named in the error", "[observe][metrics]") {
  try {
    JsonlWriter writer("/nonexistent-folder-ppctl/metrics.jsonl");
    FAIL("no error");
  } catch (const ppctl::Error& e) {
    CHECK(std::string(e.what()).find("/nonexistent-folder-ppctl/metrics.jsonl") != std::string::npos);
  }
}
