// The training step loop (schedule, global-norm check and clipping, LR schedule, AdamW step,
// logging), the optimizer set-up and the gradient dump used by the parity tests.
#include "train/loop.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <limits>

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "launch/stop_signals.hpp"
#include "schedule/simulate.hpp"
#include "train/eval.hpp"
#include "optim/distributed_optimizer.hpp"
#include "optim/grad_buffers.hpp"
#include "optim/grad_norm.hpp"
#include "optim/lr_schedule.hpp"
#include "train/microbatches.hpp"
#include "train/oracle.hpp"
#include "train/resume.hpp"
#include "train/tied_embeddings.hpp"

namespace ppctl::train {
using checkpoint::CheckpointWriter;
using checkpoint::load_checkpoint;
using checkpoint::read_checkpoint_meta;
using checkpoint::save_checkpoint;

namespace {

/// Two lines per rank. The first: mean time of the schedule (run_step, without the optimizer), mean cost of each
/// compute kind, and the measured bubble = 1 - compute / schedule time (idle and waiting), next to
/// the planned one: this rank's bubble in the simulation of the same program with ppctl plan's
/// default costs (F 1, B 2, I and W 1 ms per stage); the bytes it sent to other ranks per step; the
/// optimizer step's mean time (`optimizer_ms`, a total over the steps: AdamW, and with the distributed
/// optimizer posting its parameter all-gather, or waiting for it under runtime.overlap_param_gather
/// false) and the forwards' mean wait for that all-gather (StepResult::gather_wait_ms).
/// The second (`on_cpu` only): each kind's mean CPU time (StepResult::compute_cpu_ms), its cost
/// without core sharing.
void log_timing(const runtime::StepResult& totals, double step_ms, double optimizer_ms, int64_t steps,
                double planned_bubble, bool on_cpu) {
  static constexpr const char* kNames[] = {"F", "B", "I", "W"};
  std::string costs;
  std::string cpu_costs;
  double compute = 0.0;
  for (size_t k = 0; k < totals.compute_ms.size(); ++k) {
    compute += totals.compute_ms[k];
    if (totals.compute_count[k] == 0) continue;
    const auto count = static_cast<double>(totals.compute_count[k]);
    costs += fmt::format(" {} {:.2f} ms x{}", kNames[k], totals.compute_ms[k] / count,
                         totals.compute_count[k] / steps);
    cpu_costs += fmt::format(" {} {:.2f} ms", kNames[k], totals.compute_cpu_ms[k] / count);
  }
  const double n = static_cast<double>(steps);
  spdlog::info("timing over {} steps: schedule {:.2f} ms per step, compute {:.2f} ms ({}), receive waits {:.2f} ms, "
               "measured bubble {:.3f} (planned {:.3f}), p2p sent {:.1f} KiB per step; optimizer step {:.2f} ms, "
               "forwards waited {:.2f} ms for the parameter all-gather",
               steps, step_ms / n, compute / n, costs.empty() ? "none" : costs.substr(1),
               totals.receive_wait_ms / n, 1.0 - compute / step_ms, planned_bubble,
               static_cast<double>(totals.sent_bytes) / n / 1024.0, optimizer_ms / n, totals.gather_wait_ms / n);
  if (on_cpu && !cpu_costs.empty()) {  // on CUDA it would be only the host's time to launch the kernels
    spdlog::info("CPU time per action of the schedule's thread:{} (the means above are wall time, longer "
                 "when it waited for a core; intra-op threads beyond the first are not counted)", cpu_costs);
  }
}

/// Throws ppctl::Error when --inject-nan names a stage or dp replica the job does not have.
void check_injection(const std::optional<NanInjection>& injection, int64_t num_stages, int64_t dp_size) {
  if (injection && injection->stage >= num_stages) {
    throw Error(fmt::format("--inject-nan {}:{}: the job has {} stages (0 to {})", injection->stage,
                            injection->step, num_stages, num_stages - 1));
  }
  if (injection && injection->replica && *injection->replica >= dp_size) {
    throw Error(fmt::format("--inject-nan {}:{}:{}: the job has {} dp replica(s) (0 to {})", injection->stage,
                            injection->step, *injection->replica, dp_size, dp_size - 1));
  }
}

/// Testing (--inject-nan): fills the first of the gradients this rank counts for stage `stage` (`owned`:
/// stage_gradients, or the distributed optimizer's shard) with NaN, if it holds that stage.
void poison_gradients(const std::map<int64_t, std::vector<torch::Tensor>>& owned, int64_t stage) {
  torch::NoGradGuard no_grad;
  const auto it = owned.find(stage);
  if (it == owned.end() || it->second.empty()) return;
  spdlog::warn("fault injection: NaN written into the gradient of stage {}", stage);
  it->second.front().fill_(std::numeric_limits<double>::quiet_NaN());
}

/// train.on_nonfinite for a step with a NaN or infinite loss or gradient (the same `stats` on every
/// rank): `stop` throws, `skip` logs a warning (once per occurrence, on every rank) and returns.
void handle_nonfinite(config::NonFinitePolicy policy, const optim::GradientStats& stats, int64_t step,
                      int64_t steps) {
  if (policy == config::NonFinitePolicy::Stop) {
    throw Error(
        fmt::format("step {}: {} (fix: lower optimizer.lr, enable optimizer.clip_grad_norm, "
                    "or set train.on_nonfinite: skip)",
                    step + 1, stats.describe_nonfinite()));
  }
  spdlog::warn(
      "step {}/{}: {}: optimizer step skipped, gradients discarded "
      "(train.on_nonfinite: skip)",
      step + 1, steps, stats.describe_nonfinite());
}

/// train.on_signal after step `step` (from 1), on every rank alike: with `checkpoint` and checkpoint.dir set,
/// `save` writes a checkpoint of the step (unless `saved`: one was just written); logs what it does (the
/// global rank 0 only); returns whether the step is now checkpointed.
template <typename Save>
bool stop_on_signal(const LoopContext& ctx, int sig, int64_t step, bool saved, Save save) {
  const auto& spec = ctx.spec;
  const bool mine = ctx.stop_signal && ctx.stop_signal() == sig;
  const char* name = launch::stop_signal_name(sig);
  const auto who = fmt::format("{}{}", name, mine ? "" : " (received by another rank)");
  if (spec.train.on_signal == config::SignalPolicy::Stop) {
    if (ctx.global_rank == 0)
      spdlog::warn("stopping after step {} of {} on {} without a checkpoint (train.on_signal: stop)", step,
                   ctx.steps, who);
    return false;
  }
  if (spec.checkpoint.dir.empty()) {
    if (ctx.global_rank == 0)
      spdlog::warn("stopping after step {} of {} on {}: no checkpoint written, the spec sets no checkpoint.dir "
                   "(fix: set checkpoint.dir to make a stopped run resumable)", step, ctx.steps, who);
    return false;
  }
  const auto start = std::chrono::steady_clock::now();
  if (!saved) save();
  if (ctx.global_rank == 0)
    spdlog::warn("stopped after step {} of {} on {}: checkpoint step {} in {} ({:.2f} s); resume with "
                 "`ppctl train SPEC --resume auto`",
                 step, ctx.steps, who, step, spec.checkpoint.dir,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return true;
}

}  // namespace

TrainingEnd run_training(LoopContext& ctx) {
  using Clock = std::chrono::steady_clock;
  const auto& spec = ctx.spec;
  // optimizer.distributed shards AdamW's state over the replicas; with one replica it has nothing to shard.
  const bool distributed = spec.optimizer.distributed && ctx.data_parallel != nullptr;
  if (spec.optimizer.distributed && !distributed && ctx.global_rank == 0) {
    spdlog::info("note: optimizer.distributed shards over the data-parallel group; with dp 1 there is nothing to "
                 "shard, so every rank keeps its whole AdamW state as without it");
  }
  optim::GradientBuffers gradients(ctx.stages, ctx.data_parallel, spec.model.tie_embeddings ? ctx.embedding : nullptr,
                            optim::bucket_size_of(spec.runtime.grad_bucket_size, ctx.dp_size), distributed);
  const int64_t sequences_per_step =
      ctx.dp_size * spec.pipeline.microbatches * spec.pipeline.micro_batch_size;  // the global batch
  // A checkpoint loads into the fp32 parameters and an AdamW over them (its per-parameter format); the
  // step's optimizer then takes the weights and its share of the moments from there.
  std::unique_ptr<torch::optim::AdamW> loaded;
  checkpoint::CheckpointMeta meta;
  if (!ctx.resume_from.empty()) {
    meta = read_checkpoint_meta(ctx.resume_from);
    check_resumable(meta, spec, sequences_per_step, ctx.steps, ctx.resume_from);
    loaded = optim::make_optimizer(ctx.stages, spec.optimizer);
    load_checkpoint(ctx.resume_from, meta, ctx.stages, *loaded);
  }
  // AdamW over every parameter, or over this replica's shard (then the parameters move into buffers
  // laid out as the gradients'); over the parameters themselves, or over fp32 main copies of them
  // (runtime.precision bf16-params: the parameters become bf16 here).
  const bool bf16_weights = spec.runtime.precision == config::Precision::Bf16Params;
  std::unique_ptr<optim::StepOptimizer> step_optimizer;
  optim::DistributedOptimizer* sharded = nullptr;
  if (distributed) {
    auto owner = std::make_unique<optim::DistributedOptimizer>(ctx.stages, gradients, *ctx.data_parallel, spec.optimizer,
                                                        spec.runtime.overlap_param_gather, bf16_weights, loaded.get());
    sharded = owner.get();
    step_optimizer = std::move(owner);
  } else {
    step_optimizer = std::make_unique<optim::ReplicatedOptimizer>(ctx.stages, spec.optimizer, bf16_weights, loaded.get());
  }
  loaded.reset();
  torch::optim::AdamW& optimizer = step_optimizer->local();
  ctx.executor.set_gradient_reduction(&gradients);
  ctx.executor.set_parameter_gather(sharded);  // each F waits for its stage's updated weights
  struct Detach {  // the executor outlives this function's buffers
    runtime::Executor& executor;
    ~Detach() {
      executor.set_gradient_reduction(nullptr);
      executor.set_parameter_gather(nullptr);
    }
  } detach{ctx.executor};
  const auto& actions = ctx.program.ranks.at(static_cast<size_t>(ctx.rank));
  const double loss_scale = 1.0 / static_cast<double>(spec.pipeline.microbatches);
  const int64_t tokens_per_step = sequences_per_step * spec.model.seq_len;
  const auto num_stages = static_cast<int64_t>(ctx.program.stage_to_rank.size());
  check_injection(ctx.inject_nan, num_stages, ctx.dp_size);
  std::vector<comm::Communicator*> groups;  // the norm is summed over these (the pipeline)
  if (ctx.comm != nullptr) groups.push_back(ctx.comm);

  if (ctx.dataset != nullptr) ctx.dataset->set_samples_per_step(sequences_per_step);
  int64_t first_step = 0;
  if (!ctx.resume_from.empty()) {
    first_step = meta.step;
    if (ctx.dataset != nullptr) {  // the data position the checkpoint recorded (one text source: next_sample)
      ctx.dataset->seek(meta.data_counts.empty() ? data::BlendPosition{meta.next_sample, {meta.next_sample}}
                                                 : data::BlendPosition{meta.next_sample, meta.data_counts});
    }
    spdlog::info("resumed from {} after step {} (saved with {} stage(s); next training sequence {})",
                 ctx.resume_from, meta.step, meta.stages, meta.next_sample);
  }
  if (ctx.observer) ctx.observer->on_start(first_step);
  // Replicas hold the same weights: the first one (dp rank 0) writes. The distributed optimizer's
  // moments (and fp32 main parameters) are gathered first, by every replica, into whole tensors on the
  // CPU (the same format); fp32 main parameters are written in place of bf16 weights.
  const auto save = [&](int64_t step, double lr) {
    const auto state = step_optimizer->checkpoint_state(ctx.stages);
    if (ctx.dp_rank != 0) return;
    const optim::SeatedWeights seated(ctx.stages, state.weights);
    const CheckpointWriter writer{spec,     ctx.stages, *state.optimizer,
                                  ctx.rank, ctx.comm,   sequences_per_step,
                                  ctx.crash_in_checkpoint, ctx.steps};
    save_checkpoint(writer, step, lr);
  };

  TrainingEnd end{first_step, 0, false};
  // Timing summary over the steps after the first (which includes one-off start-up costs).
  runtime::StepResult timing;
  double timed_step_ms = 0.0;
  double timed_optimizer_ms = 0.0;
  int64_t timed_steps = 0;
  int64_t skipped_steps = 0;
  auto interval_start = Clock::now();
  int64_t interval_steps = 0;
  const auto mark = [&ctx](comm::Phase phase) {  // for the launcher's stall report
    if (ctx.progress) ctx.progress->phase.store(static_cast<int>(phase), std::memory_order_relaxed);
  };
  for (int64_t step = first_step; step < ctx.steps; ++step) {
    const auto step_start = Clock::now();
    if (ctx.progress) ctx.progress->step.store(step + 1, std::memory_order_relaxed);
    mark(comm::Phase::Schedule);
    gradients.zero();
    model::DropoutContext dropout{true, spec.train.seed, step,
                                  ctx.dp_rank * spec.pipeline.microbatches};
    auto result = ctx.executor.run_step(
        actions, microbatch_source(ctx.dataset, spec, step, ctx.dp_rank, ctx.dp_size), dropout,
        loss_scale);
    const auto schedule_end = Clock::now();
    mark(comm::Phase::GradientSync);
    // The gradients are reduced (run_step waited for the reduction): average over the replicas,
    // tied copies summed (Megatron-LM's finalize_model_grads does both after its schedule).
    if (ctx.data_parallel != nullptr) {
      if (result.loss_count > 0) {  // every replica of the last stage: the global batch's loss
        const auto sums = ctx.data_parallel->all_reduce_sum(
            {result.loss_sum, static_cast<double>(result.loss_count)});
        result.loss_sum = sums[0];
        result.loss_count = static_cast<int64_t>(sums[1]);
      }
    }
    // The gradients this rank answers for in the global norm: its stages' (the tied copy once), or its shard.
    const auto owned = step_optimizer->owned_gradients();
    if (ctx.inject_nan && ctx.inject_nan->step == step + 1 &&
        (!ctx.inject_nan->replica || *ctx.inject_nan->replica == ctx.dp_rank)) {
      poison_gradients(owned, ctx.inject_nan->stage);
    }

    // Every rank sees the same global statistics, so every rank decides alike (nobody is left
    // waiting in the next step's communication).
    // The step's first microbatch with a non-finite loss, numbered over every replica (d x m + k).
    const int64_t bad_microbatch = result.first_nonfinite_microbatch < 0
                                       ? -1
                                       : ctx.dp_rank * spec.pipeline.microbatches + result.first_nonfinite_microbatch;
    auto stats = optim::local_gradient_stats(ctx.stages, owned, num_stages, result.loss_sum, result.loss_count, bad_microbatch);
    stats.request_stop(ctx.stop_signal ? ctx.stop_signal() : 0);
    optim::reduce_gradient_stats(stats, groups);
    if (ctx.data_parallel != nullptr) optim::agree_over_replicas(stats, *ctx.data_parallel, ctx.dp_rank, ctx.dp_size);
    if (sharded) optim::sum_over_shards(stats, *ctx.data_parallel);  // each replica summed its shard only
    const double grad_norm = stats.norm();
    const bool finite = stats.finite();
    if (!finite) {
      handle_nonfinite(spec.train.on_nonfinite, stats, step, ctx.steps);
      gradients.zero();
      ++skipped_steps;
    } else if (spec.optimizer.clip_grad_norm > 0) {
      gradients.scale(optim::clip_coefficient(grad_norm, spec.optimizer.clip_grad_norm));
    }
    if (!ctx.dump_gradients_dir.empty()) {
      gradients.gather_shards();  // sharded: every replica's .grad whole again, as the dump shows them
      dump_gradients(ctx.stages, result.loss_sum, result.loss_count, grad_norm,
                     fmt::format("{}/rank{}.pt", ctx.dump_gradients_dir, ctx.global_rank));
      return {step, 0, false};
    }
    mark(comm::Phase::Optimizer);
    // Once per optimizer step, whatever the number of microbatches.
    const double lr = optim::learning_rate(spec.optimizer, step, ctx.steps);
    for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
    const auto optimizer_start = Clock::now();
    if (finite) step_optimizer->step();  // sharded: AdamW on the shard, then the parameters all-gathered
    const double optimizer_ms = std::chrono::duration<double, std::milli>(Clock::now() - optimizer_start).count();
    if (ctx.observer) ctx.observer->on_step(step, result, lr, grad_norm, !finite, step_start, schedule_end);
    ++interval_steps;
    const auto now = Clock::now();
    if (step > first_step) {
      timed_step_ms += std::chrono::duration<double, std::milli>(schedule_end - step_start).count();
      ++timed_steps;
      for (size_t k = 0; k < timing.compute_ms.size(); ++k) {
        timing.compute_ms[k] += result.compute_ms[k];
        timing.compute_cpu_ms[k] += result.compute_cpu_ms[k];
        timing.compute_count[k] += result.compute_count[k];
      }
      timing.receive_wait_ms += result.receive_wait_ms;
      timing.gather_wait_ms += result.gather_wait_ms;
      timed_optimizer_ms += optimizer_ms;
      timing.sent_bytes += result.sent_bytes;
    }
    const bool log_now = step == first_step || step + 1 == ctx.steps || (step + 1) % spec.train.log_interval == 0;
    if (result.loss_count > 0 && ctx.dp_rank == 0 && log_now) {
      const double elapsed = std::chrono::duration<double>(now - interval_start).count();
      const double step_time = std::chrono::duration<double>(now - step_start).count();
      spdlog::info(
          "step {}/{} | loss {:.4f} | lr {:.6g} | grad norm {:.4g} | {:.0f} tok/s | "
          "step {:.3f} s{}{}",
          step + 1, ctx.steps, result.loss_sum / static_cast<double>(result.loss_count),
          optimizer.param_groups().front().options().get_lr(), grad_norm,
          static_cast<double>(tokens_per_step * interval_steps) / elapsed, step_time,
          ctx.observer ? ctx.observer->log_suffix() : "", finite ? "" : " | skipped");
    }
    if (log_now) {
      interval_start = now;
      interval_steps = 0;
    }
    if (eval_due(spec.eval, step + 1, ctx.steps)) {
      mark(comm::Phase::Eval);
      const auto eval_start = Clock::now();
      const auto loss = evaluate(ctx.executor, actions, ctx.dataset, spec, ctx.dp_rank, ctx.dp_size,
                                 ctx.data_parallel);
      if (loss && ctx.dp_rank == 0) {
        spdlog::info("eval after step {}: loss {:.4f} ({} held-out batch(es), {:.2f} s)", step + 1, *loss,
                     spec.eval.batches,
                     std::chrono::duration<double>(Clock::now() - eval_start).count());
        if (ctx.observer) ctx.observer->on_eval(step + 1, *loss, spec.eval.batches);
      }
      interval_start = Clock::now();  // tokens/s counts training only
    }
    const auto interval = spec.checkpoint.interval;
    const bool saved = !spec.checkpoint.dir.empty() && (step + 1 == ctx.steps || (interval > 0 && (step + 1) % interval == 0));
    if (saved) {
      mark(comm::Phase::Checkpoint);
      save(step + 1, lr);
      interval_start = Clock::now();
    }
    end.steps_done = step + 1;
    if (const int sig = stats.stop_signal(); sig != 0 && step + 1 < ctx.steps) {
      end.stop_signal = sig;
      end.checkpointed = stop_on_signal(ctx, sig, step + 1, saved, [&] {
        mark(comm::Phase::Checkpoint);
        save(step + 1, lr);
      });
      break;
    }
  }
  mark(comm::Phase::Finishing);
  step_optimizer->wait_all();  // every weight current before anything reads them (hashes, export)
  if (timed_steps > 0) {
    log_timing(timing, timed_step_ms, timed_optimizer_ms, timed_steps,
               schedule::simulate(ctx.program, {}).bubble_fraction.at(static_cast<size_t>(ctx.rank)),
               spec.runtime.device == config::Device::Cpu);
  }
  log_tied_weights(ctx.stages, *step_optimizer);
  int64_t parameters = 0, weight_bytes = 0;
  for (const auto& stage : ctx.stages) {
    for (const auto& p : stage->parameters()) {
      parameters += p.numel();
      weight_bytes += static_cast<int64_t>(p.nbytes());
    }
  }
  const int64_t state_bytes = optim::adamw_state_bytes(optimizer);
  const int64_t main_bytes = step_optimizer->main_parameter_bytes();
  const auto per_parameter = [&](int64_t bytes) {
    return static_cast<double>(bytes) / static_cast<double>(std::max<int64_t>(parameters, 1));
  };
  // What plan's static columns estimate, measured: tests compare them with Megatron-Core's bytes per parameter.
  spdlog::info("AdamW state on this rank: {} bytes for {} parameters ({:.2f} B per parameter{}); weights {} bytes, "
               "gradient buffers {} bytes, fp32 main parameters {} bytes ({:.2f} B per parameter in all, precision {})",
               state_bytes, parameters, per_parameter(state_bytes),
               sharded ? fmt::format(", sharded over dp {}", ctx.dp_size) : "", weight_bytes, gradients.bytes(),
               main_bytes, per_parameter(weight_bytes + gradients.bytes() + state_bytes + main_bytes),
               config::to_string(spec.runtime.precision));
  if (skipped_steps > 0) {
    spdlog::warn(
        "{} of {} optimizer steps skipped for non-finite values "
        "(train.on_nonfinite: skip)",
        skipped_steps, ctx.steps);
  }
  return end;
}

}  // namespace ppctl::train
