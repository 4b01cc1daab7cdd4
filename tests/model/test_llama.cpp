// Tests for model/llama and model/gpt2's options: the Llama block equals an independent reference
// written from the papers' formulas (per-head loops, explicit causal softmax, pairwise rotation, in
// float64), the parameter names and shapes are Hugging Face LlamaForCausalLM's, the FLOP count equals
// the matrix products of the built modules, and gpt2's gelu_tanh is the tanh approximation.
#include "support/catch_torch.hpp"  // first: keeps Catch2's CHECK (see there)
#include <catch2/catch_approx.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <string>

#include "model/gpt2.hpp"
#include "model/llama.hpp"
#include "model/stage.hpp"
#include "observe/metrics.hpp"
#include "plan/layout.hpp"

using namespace ppctl;

namespace {

config::ModelSpec llama_spec() {
  config::ModelSpec m;
  m.arch = config::Arch::Llama;
  m.vocab_size = 300;
  m.layers = 2;
  m.hidden = 32;
  m.heads = 4;
  m.kv_heads = 2;
  m.seq_len = 12;
  m.ffn_hidden = 48;
  m.rope_theta = 500.0;  // a small base turns every pair noticeably within 12 positions
  m.norm_eps = 1e-6;
  m.tie_embeddings = false;
  return m;
}

std::map<std::string, torch::Tensor> named(const torch::nn::Module& module) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : module.named_parameters()) out[item.key()] = item.value();
  return out;
}

/// x [b, s, d] rotated pair by pair: (x_i, x_{i + d/2}) at position t turns by t theta^(-2i/d).
torch::Tensor reference_rope(const torch::Tensor& x, double theta) {
  const int64_t s = x.size(1), d = x.size(2), half = d / 2;
  auto out = x.clone();
  for (int64_t t = 0; t < s; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * std::pow(theta, -2.0 * static_cast<double>(i) / d);
      const auto a = x.select(1, t).select(1, i), b = x.select(1, t).select(1, i + half);
      out.select(1, t).select(1, i).copy_(a * std::cos(angle) - b * std::sin(angle));
      out.select(1, t).select(1, i + half).copy_(b * std::cos(angle) + a * std::sin(angle));
    }
  }
  return out;
}

/// The Llama block from its formulas, float64, one head at a time; `p` its parameters (block-local names).
torch::Tensor reference_block(const config::ModelSpec& m, std::map<std::string, torch::Tensor> p,
                              const torch::Tensor& x) {
  for (auto& [name, t] : p) t = t.detach().to(torch::kDouble);
  const int64_t s = x.size(1), hd = m.hidden / m.heads, group = m.heads / m.kv_heads;
  const auto rms = [&](const torch::Tensor& v, const torch::Tensor& w) {
    return v / torch::sqrt((v * v).mean(-1, true) + m.norm_eps) * w;
  };
  const auto a = rms(x, p.at("attn_norm.weight"));
  const auto q = a.matmul(p.at("q_proj.weight").t()), k = a.matmul(p.at("k_proj.weight").t()),
             v = a.matmul(p.at("v_proj.weight").t());
  const auto future = torch::ones({s, s}, torch::kBool).triu(1);
  std::vector<torch::Tensor> heads;
  for (int64_t j = 0; j < m.heads; ++j) {
    const int64_t g = j / group;  // the key/value head serving query head j
    const auto qj = reference_rope(q.narrow(-1, j * hd, hd), m.rope_theta);
    const auto kj = reference_rope(k.narrow(-1, g * hd, hd), m.rope_theta);
    const auto scores = qj.matmul(kj.transpose(1, 2)) / std::sqrt(static_cast<double>(hd));
    const auto probs = torch::softmax(scores.masked_fill(future, -INFINITY), -1);
    heads.push_back(probs.matmul(v.narrow(-1, g * hd, hd)));
  }
  const auto h = x + torch::cat(heads, -1).matmul(p.at("o_proj.weight").t());
  const auto n = rms(h, p.at("mlp_norm.weight"));
  const auto gate = n.matmul(p.at("gate_proj.weight").t());
  const auto up = n.matmul(p.at("up_proj.weight").t());
  return h + (gate * torch::sigmoid(gate) * up).matmul(p.at("down_proj.weight").t());
}

}  // namespace

TEST_CASE("the llama block equals the reference formulas (RMSNorm, RoPE, GQA, SwiGLU)") {
  at::set_num_threads(1);
  auto m = llama_spec();
  const auto kv_heads = GENERATE(1, 2, 4);
  m.kv_heads = kv_heads;
  CAPTURE(kv_heads);
  model::LlamaBlockImpl block(m, 1, 7);
  {
    torch::NoGradGuard no_grad;  // norm weights other than 1, so that their product is tested
    for (auto& [name, t] : named(block)) {
      if (name.find("norm") != std::string::npos) t.uniform_(0.5, 1.5);
    }
  }
  const auto x = torch::randn({2, m.seq_len, m.hidden});
  const auto got = block.forward(x, model::DropoutContext{false});
  const auto expected = reference_block(m, named(block), x.to(torch::kDouble));
  CHECK(torch::allclose(got.to(torch::kDouble), expected, 1e-5, 1e-5));
}

TEST_CASE("rotary tables and RMSNorm match their definitions") {
  const auto [cos, sin] = model::rotary_tables(5, 8, 10000.0, torch::kCPU);
  REQUIRE(cos.sizes() == torch::IntArrayRef({5, 8}));
  CHECK(cos.scalar_type() == torch::kFloat);
  for (int64_t t = 0; t < 5; ++t) {
    for (int64_t i = 0; i < 8; ++i) {
      const double angle = t * std::pow(10000.0, -2.0 * (i % 4) / 8.0);
      CHECK(cos[t][i].item<double>() == Catch::Approx(std::cos(angle)).margin(1e-6));
      CHECK(sin[t][i].item<double>() == Catch::Approx(std::sin(angle)).margin(1e-6));
    }
  }
  // Rotation keeps the norm of every pair and makes q.k depend only on the distance.
  // The same q and k at every position.
  const auto rq = model::apply_rotary(torch::randn({1, 1, 1, 8}).expand({1, 1, 5, 8}), cos, sin);
  const auto rk = model::apply_rotary(torch::randn({1, 1, 1, 8}).expand({1, 1, 5, 8}), cos, sin);
  const auto dot = [&](int64_t a, int64_t b) { return (rq[0][0][a] * rk[0][0][b]).sum().item<double>(); };
  CHECK(dot(3, 1) == Catch::Approx(dot(4, 2)).margin(1e-5));
  CHECK(dot(2, 2) == Catch::Approx(dot(0, 0)).margin(1e-5));

  model::RMSNorm norm(6, 1e-5);
  const auto x = torch::randn({3, 6});
  const auto expected = x / torch::sqrt(x.pow(2).mean(-1, true) + 1e-5);
  CHECK(torch::allclose(norm->forward(x), expected, 1e-6, 1e-6));
  CHECK(norm->forward(x.to(torch::kBFloat16)).scalar_type() == torch::kFloat);  // fp32 weight * bf16 -> fp32
}

TEST_CASE("llama parameter names and shapes are Hugging Face LlamaForCausalLM's") {
  const auto m = llama_spec();
  const int64_t hd = 8, f = 48;
  model::StageModule whole(m, model::whole_model_layout(m), 1);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& item : whole->named_parameters()) shapes[item.key()] = item.value().sizes().vec();
  std::map<std::string, std::vector<int64_t>> expected{
      {"tok_embed.weight", {300, 32}}, {"ln_f.weight", {32}}, {"lm_head.weight", {300, 32}}};
  for (int i = 0; i < 2; ++i) {
    const auto b = fmt::format("block{}.", i);
    expected[b + "attn_norm.weight"] = {32};
    expected[b + "q_proj.weight"] = {4 * hd, 32};
    expected[b + "k_proj.weight"] = {2 * hd, 32};
    expected[b + "v_proj.weight"] = {2 * hd, 32};
    expected[b + "o_proj.weight"] = {32, 4 * hd};
    expected[b + "mlp_norm.weight"] = {32};
    expected[b + "gate_proj.weight"] = {f, 32};
    expected[b + "up_proj.weight"] = {f, 32};
    expected[b + "down_proj.weight"] = {32, f};
  }
  CHECK(shapes == expected);
  // ffn_hidden 0: Meta's rule, int(2 x 4h / 3) rounded up to 256.
  auto by_rule = m;
  by_rule.ffn_hidden = 0;
  model::LlamaBlockImpl block(by_rule, 0, 1);
  CHECK(named(block).at("gate_proj.weight").size(0) == 256);
}

TEST_CASE("llama initialisation: norms 1, weights N(0, 0.02), residual outputs scaled by 1/sqrt(2L)") {
  auto m = llama_spec();
  m.hidden = 256;
  m.heads = 8;
  m.kv_heads = 8;
  m.ffn_hidden = 512;
  m.layers = 8;
  model::LlamaBlockImpl block(m, 3, 11);
  const auto p = named(block);
  CHECK(torch::equal(p.at("attn_norm.weight"), torch::ones({256})));
  CHECK(p.at("q_proj.weight").std().item<double>() == Catch::Approx(0.02).epsilon(0.02));
  CHECK(p.at("up_proj.weight").std().item<double>() == Catch::Approx(0.02).epsilon(0.02));
  CHECK(p.at("o_proj.weight").std().item<double>() == Catch::Approx(0.02 / 4.0).epsilon(0.02));
  CHECK(p.at("down_proj.weight").std().item<double>() == Catch::Approx(0.02 / 4.0).epsilon(0.02));
  CHECK_FALSE(torch::equal(p.at("q_proj.weight").slice(0, 0, 8), p.at("k_proj.weight").slice(0, 0, 8)));
}

TEST_CASE("gpt2 activation gelu_tanh is the tanh approximation; gelu stays exact") {
  at::set_num_threads(1);
  config::ModelSpec exact;
  exact.hidden = 16;
  exact.heads = 2;
  auto approx = exact;
  approx.activation = config::Activation::GeluTanh;
  model::Gpt2BlockImpl a(exact, 0, 3), b(approx, 0, 3);
  // At the initial std (0.02) the MLP's inputs sit near 0, where the two GELUs agree to below
  // float rounding of the residual; widen fc1 and fc2 alike in both blocks so the activations
  // reach |x| ~ 1-3, where the approximation differs by ~1e-4, whatever the CPU's kernels.
  {
    torch::NoGradGuard no_grad;
    for (auto* block : {&a, &b}) {
      auto p = block->named_parameters();
      p["fc1.weight"].mul_(25);
      p["fc2.weight"].mul_(25);
    }
  }
  const auto x = torch::randn({1, 4, 16}) * 3;
  const auto ya = a.forward(x, model::DropoutContext{false});
  const auto yb = b.forward(x, model::DropoutContext{false});
  CHECK_FALSE(torch::equal(ya, yb));
  const auto z = torch::randn({64}) * 3;
  const auto tanh_formula =
      0.5 * z * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z.pow(3))));
  CHECK(torch::allclose(torch::gelu(z, "tanh"), tanh_formula, 1e-5, 1e-6));
  CHECK((ya - yb).abs().max().item<double>() < 1e-2);  // close: the approximation is good
}

TEST_CASE("model FLOPs equal the matrix products of the built modules") {
  // An independent count: 2 FLOPs per multiply-add of every block weight matrix and the head over
  // every token, plus scores and values 2 x 2 b s^2 (heads x head_dim) per block; x3 for the backward.
  for (const auto arch : {config::Arch::Gpt2, config::Arch::Llama}) {
    auto m = llama_spec();
    m.arch = arch;
    if (arch == config::Arch::Gpt2) {
      m.kv_heads = 0;
      m.rope_theta = 10000.0;
    }
    for (const bool tied : {false, true}) {
      m.tie_embeddings = tied;
      CAPTURE(config::to_string(arch), tied);
      model::StageModule whole(m, model::whole_model_layout(m), 1);
      const int64_t b = 3;
      const double tokens = static_cast<double>(b * m.seq_len);
      double forward = 0;
      for (const auto& item : whole->named_parameters()) {
        const auto& name = item.key();
        const bool matrix = item.value().dim() == 2 && name.find("embed") == std::string::npos;
        if (matrix) forward += 2.0 * tokens * static_cast<double>(item.value().numel());
      }
      if (tied) forward += 2.0 * tokens * static_cast<double>(m.vocab_size * m.hidden);  // the head reuses tok_embed
      forward += static_cast<double>(m.layers) * 2 * 2 * tokens * static_cast<double>(m.seq_len * m.hidden);
      CHECK(observe::model_flops_per_step(m, b) == Catch::Approx(3 * forward).epsilon(1e-12));
    }
  }
}
