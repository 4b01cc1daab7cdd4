// Gradient dumps, the unpipelined reference and the comparison behind `ppctl verify`.
#include "train/oracle.hpp"

#include <fmt/format.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "data/dataset.hpp"
#include "interop/hf_load.hpp"
#include "plan/layout.hpp"
#include "schedule/job_program.hpp"
#include "optim/grad_norm.hpp"
#include "train/microbatches.hpp"
#include "optim/optimizer.hpp"

namespace ppctl::train {
namespace {

/// What runtime.p2p_dtype bf16 does to a tensor crossing ranks, as one autograd node: the forward
/// rounds the activation to bfloat16 and back (the executor's cast before SEND_F and after RECV_F),
/// the backward rounds the incoming gradient the same way (before SEND_B, after RECV_B).
struct Bf16Wire : public torch::autograd::Function<Bf16Wire> {
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x) {
    return x.to(torch::kBFloat16).to(torch::kFloat);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    return {grads[0].to(torch::kBFloat16).to(torch::kFloat)};
  }
};

/// The parts of the whole model (0 = embedding, 1 + k = block k, layers + 1 = the head) after which
/// the pipeline sends bf16 between ranks: the end of every stage whose successor is on another rank,
/// ascending; none unless runtime.p2p_dtype resolves to bf16 (hand-offs on one rank are not cast).
std::vector<int64_t> bf16_wire_cuts(const config::JobSpec& spec) {
  if (config::p2p_dtype_of(spec.runtime) != config::P2pDtype::Bf16) return {};
  const auto program = schedule::job_program(spec);
  const auto layout = plan::make_layout(spec, &program.stage_to_rank);
  std::vector<int64_t> cuts;
  for (size_t s = 0; s + 1 < layout.stages.size(); ++s) {
    if (layout.stages[s].rank != layout.stages[s + 1].rank) cuts.push_back(layout.stages[s].layers.end + 1);
  }
  return cuts;
}

}  // namespace

void dump_gradients(const std::vector<model::StageModule>& stages, double loss_sum,
                    int64_t loss_count, double grad_norm, const std::string& path) {
  c10::Dict<std::string, torch::Tensor> grads;
  for (const auto& stage : stages) {
    for (const auto& item : stage->named_parameters()) {
      auto grad = item.value().grad();
      // Whole again at t > 1 (a collective over the stage's tensor-parallel ranks, parameter by parameter).
      grad = stage->whole_of(item.key(), grad.defined() ? grad.detach() : torch::zeros_like(item.value()));
      grads.insert(item.key(), grad.cpu().clone());
    }
  }
  if (loss_count > 0) {
    grads.insert(kLossKey,
                 torch::tensor(loss_sum / static_cast<double>(loss_count), torch::kDouble));
  }
  grads.insert(kGradNormKey, torch::tensor(grad_norm, torch::kDouble));
  const auto bytes = torch::pickle_save(grads);
  core::write_file_atomically(path, std::string_view(bytes.data(), bytes.size()));
}

GradientMap load_gradient_dump(const std::string& path) {
  const auto text = core::read_file(path);  // throws naming the dump when missing or unreadable
  const std::vector<char> bytes(text.begin(), text.end());
  GradientMap grads;
  for (const auto& item : torch::pickle_load(bytes).toGenericDict()) {
    grads.emplace(item.key().toStringRef(), item.value().toTensor());
  }
  return grads;
}

GradientMap load_gradient_dumps(const std::string& dir, int64_t ranks) {
  GradientMap grads;
  for (int64_t r = 0; r < ranks; ++r) {
    const auto path = fmt::format("{}/rank{}.pt", dir, r);
    for (const auto& [name, tensor] : load_gradient_dump(path)) {
      const auto [it, added] = grads.emplace(name, tensor);
      if (added) continue;
      // The global norm is on every rank, a stage's gradients on each of its data-parallel replicas.
      if (!torch::equal(it->second, tensor)) {
        throw Error(fmt::format("gradient dump {}: {} differs from its copy in an earlier dump "
                                "(max difference {:.3e}; every rank holding it must hold the "
                                "same value)",
                                path, name,
                                (it->second.to(torch::kDouble) - tensor.to(torch::kDouble))
                                    .abs().max().item<double>()));
      }
    }
  }
  return grads;
}

GradientMap reference_gradients(const config::JobSpec& spec, int64_t step) {
  model::StageModule whole(spec.model, model::whole_model_layout(spec.model), spec.train.seed);
  if (!spec.model.init_from.empty()) {
    interop::load_hf_weights(spec.model.init_from, spec.model, whole->layout(), *whole);
  }
  whole->set_precision(spec.runtime.precision);
  if (spec.runtime.precision == config::Precision::Bf16Params) {  // bf16 weights, fp32 gradients accumulated
    optim::convert_weights_to_bf16({whole});
    for (auto& p : whole->parameters()) p.mutable_grad() = torch::zeros(p.sizes(), torch::kFloat);
  }
  const data::Dataset dataset(spec);
  const auto cuts = bf16_wire_cuts(spec);
  // The global batch of dp replicas: replica r's microbatch j is global microbatch r x m0 + j.
  const int64_t m0 = spec.pipeline.microbatches;
  const int64_t dp = std::max<int64_t>(spec.pipeline.data_parallel, 1);
  const int64_t m = m0 * dp;
  // Per token over the global batch, scaled as the pipeline scales (train/loop.cpp): each replica's loss sums by
  // dp / N, the replicas' fp32 sums then averaged over dp. Under bf16-params one microbatch's gradient is computed
  // in bf16 and rounds at this scale: a single 1 / N rounded otherwise when dp is not a power of two.
  const int64_t targets = step_target_tokens(&dataset, spec, step, dp);
  const double scale = loss_scale(targets, dp);
  double loss_sum = 0.0;
  for (int64_t j = 0; j < m; ++j) {
    const auto batch = microbatch(dataset, spec, step, j % m0, j / m0, dp);
    const auto ctx = whole->context(model::DropoutContext{true, spec.train.seed, step, j}, batch.positions,
                                    batch.documents);
    torch::Tensor x = batch.tokens;
    int64_t begin = 0;
    for (const int64_t cut : cuts) {  // bf16 on the wire: round where the pipeline sends (none: forward())
      x = Bf16Wire::apply(whole->forward_parts(x, begin, cut, ctx));
      begin = cut;
    }
    auto loss = whole->loss_sum(whole->forward_parts(x, begin, whole->num_parts(), ctx), batch.targets,
                                batch.target_mask);
    loss_sum += loss.item<double>();
    (loss * scale).backward();
  }
  if (dp > 1) {
    torch::NoGradGuard no_grad;
    for (auto& p : whole->parameters())
      if (p.grad().defined()) p.mutable_grad().div_(static_cast<double>(dp));
  }
  const std::vector<model::StageModule> stages{whole};
  const double norm = optim::local_gradient_stats(stages, 1, loss_sum, m).norm();
  if (spec.optimizer.clip_grad_norm > 0) {
    optim::scale_gradients(stages, optim::clip_coefficient(norm, spec.optimizer.clip_grad_norm));
  }
  GradientMap grads;
  for (const auto& item : whole->named_parameters()) grads[item.key()] = item.value().grad();
  grads[kLossKey] = torch::tensor(targets == 0 ? 0.0 : loss_sum / static_cast<double>(targets), torch::kDouble);
  grads[kGradNormKey] = torch::tensor(norm, torch::kDouble);
  return grads;
}

std::vector<GradientDifference> compare_gradients(const GradientMap& pipelined,
                                                  const GradientMap& reference) {
  std::vector<GradientDifference> rows;
  for (const auto& [name, expected] : reference) {
    auto it = pipelined.find(name);
    if (name == "tok_embed.weight" && !reference.count("lm_head.weight") &&
        pipelined.count("lm_head.weight")) {
      // Tied embeddings: the last stage's copy must also hold the shared weight's gradient.
      GradientMap copy{{name, pipelined.at("lm_head.weight")}};
      auto row = compare_gradients(copy, {{name, expected}}).front();
      row.name = "lm_head.weight (tied copy)";
      rows.push_back(row);
    }
    if (it == pipelined.end()) throw Error(fmt::format("{} is missing from the pipelined run", name));
    if (it->second.sizes() != expected.sizes()) {
      throw Error(fmt::format("{}: pipelined shape {} differs from the reference shape {}", name,
                              fmt::join(it->second.sizes(), "x"), fmt::join(expected.sizes(), "x")));
    }
    const auto a = it->second.to(torch::kDouble), b = expected.to(torch::kDouble);
    GradientDifference row{name, 0.0, b.abs().max().item<double>()};
    row.max_relative_difference =
        (a - b).abs().max().item<double>() / std::max(row.reference_max_abs, 1e-30);
    rows.push_back(row);
  }
  for (const auto& [name, tensor] : pipelined) {
    if (name == "lm_head.weight" && reference.count("tok_embed.weight")) continue;  // tied copy
    if (!reference.count(name)) throw Error(fmt::format("{} is not a parameter of the model", name));
  }
  return rows;
}

}  // namespace ppctl::train
