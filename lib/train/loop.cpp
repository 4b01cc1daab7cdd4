// The training step loop, the optimizer set-up and the gradient dump used by the parity tests.
#include "train/loop.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/serialize.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "core/error.hpp"
#include "train/microbatches.hpp"

namespace ppctl::train {

std::unique_ptr<torch::optim::AdamW> make_optimizer(torch::nn::Module& module,
                                                    const config::OptimizerSpec& spec) {
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : module.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto options = torch::optim::AdamWOptions(spec.lr)
                     .betas({spec.beta1, spec.beta2})
                     .eps(spec.eps)
                     .weight_decay(spec.weight_decay);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(options));
  auto no_decay_options = options;
  no_decay_options.weight_decay(0.0);
  groups.emplace_back(no_decay, std::make_unique<torch::optim::AdamWOptions>(no_decay_options));
  return std::make_unique<torch::optim::AdamW>(std::move(groups), options);
}

void dump_gradients(torch::nn::Module& module, double loss_sum, int64_t loss_count,
                    const std::string& path) {
  c10::Dict<std::string, torch::Tensor> grads;
  for (const auto& item : module.named_parameters()) {
    auto grad = item.value().grad();
    grads.insert(item.key(), grad.defined() ? grad.detach().cpu().clone()
                                            : torch::zeros_like(item.value()).cpu());
  }
  if (loss_count > 0) {
    grads.insert("__loss__", torch::tensor(loss_sum / static_cast<double>(loss_count),
                                           torch::kDouble));
  }
  const auto bytes = torch::pickle_save(grads);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw Error(fmt::format("cannot write gradient dump {}", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error(fmt::format("cannot rename {} to {}", tmp, path));
  }
}

void run_training(LoopContext& ctx) {
  using Clock = std::chrono::steady_clock;
  const auto& spec = ctx.spec;
  auto optimizer = make_optimizer(*ctx.stage, spec.optimizer);
  const auto& actions = ctx.program.ranks.at(static_cast<size_t>(ctx.rank));
  const double loss_scale = 1.0 / static_cast<double>(spec.pipeline.microbatches);
  const int64_t tokens_per_step =
      spec.pipeline.microbatches * spec.pipeline.micro_batch_size * spec.model.seq_len;

  auto interval_start = Clock::now();
  int64_t interval_steps = 0;
  for (int64_t step = 0; step < ctx.steps; ++step) {
    const auto step_start = Clock::now();
    optimizer->zero_grad(/*set_to_none=*/true);
    model::DropoutContext dropout{true, spec.train.seed, step, 0};
    const auto result = ctx.executor.run_step(
        actions, microbatch_source(ctx.dataset, spec, step), dropout, loss_scale);
    if (!ctx.dump_gradients_dir.empty()) {
      dump_gradients(*ctx.stage, result.loss_sum, result.loss_count,
                     fmt::format("{}/rank{}.pt", ctx.dump_gradients_dir, ctx.rank));
      return;
    }
    optimizer->step();
    ++interval_steps;
    const auto now = Clock::now();
    const bool log_now = step == 0 || step + 1 == ctx.steps || (step + 1) % spec.train.log_interval == 0;
    if (result.loss_count > 0 && log_now) {
      const double elapsed = std::chrono::duration<double>(now - interval_start).count();
      const double step_time = std::chrono::duration<double>(now - step_start).count();
      spdlog::info("step {}/{} | loss {:.4f} | lr {:.3g} | {:.0f} tok/s | step {:.3f} s", step + 1,
                   ctx.steps, result.loss_sum / static_cast<double>(result.loss_count),
                   spec.optimizer.lr,
                   static_cast<double>(tokens_per_step * interval_steps) / elapsed, step_time);
    }
    if (log_now) {
      interval_start = now;
      interval_steps = 0;
    }
  }
}

}  // namespace ppctl::train
