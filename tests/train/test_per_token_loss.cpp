// Tests for the per-token loss over the global batch (train::loss_scale, train::step_target_tokens and the
// executor's loss sums): two microbatches with 1 and 99 target tokens give the gradient and loss of the mean over
// all 100 targets, not the mean of the two microbatches' means; the same when the two are data-parallel replicas;
// a microbatch without targets adds nothing and no NaN.
#include <catch2/catch_test_macros.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "model/stage.hpp"
#include "plan/layout.hpp"
#include "runtime/executor.hpp"
#include "schedule/job_program.hpp"
#include "train/microbatches.hpp"

using namespace ppctl;

namespace {

constexpr int64_t kSeq = 100;

config::JobSpec spec_of(int64_t microbatches) {
  config::JobSpec spec;
  spec.model = {64, 2, 32, 4, kSeq, 0.0};  // vocab, layers, hidden, heads, seq_len, dropout
  spec.pipeline.schedule = config::ScheduleKind::GPipe;
  spec.pipeline.microbatches = microbatches;
  spec.pipeline.micro_batch_size = 1;
  return spec;
}

/// Microbatch j: random ids; its target mask has `targets[j]` ones (the first positions), the rest 0.
runtime::MicrobatchData microbatch_with(int64_t j, int64_t targets, int64_t vocab) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(40 + j));
  auto ids = torch::randint(0, vocab, {1, kSeq + 1}, gen, torch::kLong);
  auto mask = torch::zeros({1, kSeq}, torch::kFloat);
  mask.narrow(1, 0, targets).fill_(1.0);
  return {ids.slice(1, 0, kSeq), ids.slice(1, 1, kSeq + 1), mask, {}, {}};
}

/// Runs microbatches `targets` (their target counts) through one whole-model stage with `scale`; returns the
/// gradients (name -> tensor) and the result.
std::pair<std::map<std::string, torch::Tensor>, runtime::StepResult> step(const std::vector<int64_t>& targets,
                                                                         int64_t first, double scale) {
  at::set_num_threads(1);
  const auto spec = spec_of(static_cast<int64_t>(targets.size()));
  const auto program = schedule::job_program(spec);
  const auto layout = plan::make_layout(spec, &program.stage_to_rank);
  model::StageModule stage(spec.model, layout.stages.at(0), /*seed=*/3);
  runtime::Executor executor({{0, stage}}, program, 0, nullptr, {1, kSeq, spec.model.hidden}, torch::kCPU);
  const runtime::MicrobatchSource data = [&](int64_t j) {
    return microbatch_with(first + j, targets.at(static_cast<size_t>(j)), spec.model.vocab_size);
  };
  auto result = executor.run_step(program.ranks.at(0), data, model::DropoutContext{false}, scale);
  std::map<std::string, torch::Tensor> grads;
  for (const auto& item : stage->named_parameters()) grads[item.key()] = item.value().grad().clone();
  return {grads, result};
}

/// The reference: one unpipelined model, the summed masked token losses of every microbatch / the targets.
struct Reference {
  std::map<std::string, torch::Tensor> grads;
  double loss = 0.0;
  double mean_of_means = 0.0;
};
Reference reference(const std::vector<int64_t>& targets) {
  const auto spec = spec_of(1);
  model::StageModule whole(spec.model, model::whole_model_layout(spec.model), /*seed=*/3);
  int64_t total = 0;
  for (const auto n : targets) total += n;
  torch::Tensor sum = torch::zeros({});
  Reference out;
  for (size_t j = 0; j < targets.size(); ++j) {
    const auto batch = microbatch_with(static_cast<int64_t>(j), targets[j], spec.model.vocab_size);
    const auto losses = whole->token_losses(whole->forward(batch.tokens, model::DropoutContext{false}), batch.targets);
    const auto masked = (losses * batch.target_mask.reshape({-1})).sum();
    sum = sum + masked;
    out.mean_of_means += masked.item<double>() / static_cast<double>(targets[j]) / static_cast<double>(targets.size());
  }
  (sum / static_cast<double>(total)).backward();
  out.loss = sum.item<double>() / static_cast<double>(total);
  for (const auto& item : whole->named_parameters()) out.grads[item.key()] = item.value().grad();
  return out;
}

double max_relative(const std::map<std::string, torch::Tensor>& a, const std::map<std::string, torch::Tensor>& b) {
  double worst = 0.0;
  for (const auto& [name, t] : b) {
    const auto diff = (a.at(name) - t).abs().max().item<double>() / t.abs().max().clamp_min(1e-30).item<double>();
    worst = std::max(worst, diff);
  }
  return worst;
}

}  // namespace

TEST_CASE("two microbatches with 1 and 99 targets give the mean over the 100 targets, not the mean of means") {
  const std::vector<int64_t> targets{1, 99};
  const auto expected = reference(targets);
  REQUIRE(std::abs(expected.mean_of_means - expected.loss) > 1e-3 * expected.loss);  // the two rules differ here
  const auto [grads, result] = step(targets, 0, train::loss_scale(100, 1));
  CHECK(result.loss_count == 100);
  CHECK(result.loss_microbatches == 2);
  CHECK(std::abs(runtime::step_loss(result) - expected.loss) < 1e-6 * expected.loss);
  CHECK(max_relative(grads, expected.grads) < 1e-5);
}

TEST_CASE("the same over two data-parallel replicas: each scales by dp / all targets, the replicas' mean is right") {
  const std::vector<int64_t> targets{1, 99};
  const auto expected = reference(targets);
  const double scale = train::loss_scale(100, 2);
  const auto [first, first_result] = step({1}, 0, scale);  // replica 0: microbatch 0
  const auto [second, second_result] = step({99}, 1, scale);  // replica 1: microbatch 1
  std::map<std::string, torch::Tensor> averaged;  // what the data-parallel reduction does (averaged over dp)
  for (const auto& [name, g] : first) averaged[name] = (g + second.at(name)) / 2.0;
  CHECK(max_relative(averaged, expected.grads) < 1e-5);
  const double loss = (first_result.loss_sum + second_result.loss_sum) /
                      static_cast<double>(first_result.loss_count + second_result.loss_count);
  CHECK(std::abs(loss - expected.loss) < 1e-6 * expected.loss);
}

TEST_CASE("a microbatch without targets adds nothing and no NaN; a step without any has loss 0") {
  const std::vector<int64_t> targets{0, 50};
  const auto expected = reference(targets);
  const auto [grads, result] = step(targets, 0, train::loss_scale(50, 1));
  CHECK(result.first_nonfinite_microbatch == -1);
  CHECK(result.loss_count == 50);
  CHECK(max_relative(grads, expected.grads) < 1e-5);
  const auto [none, none_result] = step({0}, 0, train::loss_scale(0, 1));
  CHECK(none_result.loss_count == 0);
  CHECK(runtime::step_loss(none_result) == 0.0);
  CHECK(none_result.first_nonfinite_microbatch == -1);
  for (const auto& [name, g] : none) CHECK(g.abs().max().item<double>() == 0.0);
}

TEST_CASE("the step's target tokens: every window's tokens without a chat dataset") {
  auto spec = spec_of(4);
  CHECK(train::step_target_tokens(nullptr, spec, 3, 2) == 2 * 4 * 1 * kSeq);
  CHECK(train::loss_scale(2 * 4 * kSeq, 2) == 1.0 / (4.0 * kSeq));  // dp / N: the old 1 / m of per-token means
}
