// The training step loop (schedule, global-norm check and clipping, LR schedule, AdamW step, eval, checkpoints,
// stop signals, logging) as the named steps of one run, the optimizer set-up and the gradient dump of the parity tests.
#include "train/loop.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
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

/// Throws ppctl::Error when --inject-nan names a stage, dp replica or tp rank the job does not have.
void check_injection(const std::optional<NanInjection>& injection, int64_t num_stages, int64_t dp_size,
                     int64_t tp_size) {
  if (injection && injection->tp_rank && *injection->tp_rank >= tp_size) {
    throw Error(fmt::format("--inject-nan {}:{}:{}:{}: the job has {} tp rank(s) per stage (0 to {})", injection->stage,
                            injection->step, injection->replica.value_or(0), *injection->tp_rank, tp_size,
                            tp_size - 1));
  }
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

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

/// The timing summary's totals over the steps after the first (which includes one-off start-up costs).
struct TimingTotals {
  runtime::StepResult schedule;  ///< sums of the StepResults' times, counts and bytes
  double step_ms = 0.0;          ///< the schedules' wall time
  double optimizer_ms = 0.0;
  int64_t steps = 0;

  void add(const runtime::StepResult& result, double schedule_ms, double step_optimizer_ms) {
    step_ms += schedule_ms;
    ++steps;
    for (size_t k = 0; k < schedule.compute_ms.size(); ++k) {
      schedule.compute_ms[k] += result.compute_ms[k];
      schedule.compute_cpu_ms[k] += result.compute_cpu_ms[k];
      schedule.compute_count[k] += result.compute_count[k];
    }
    schedule.receive_wait_ms += result.receive_wait_ms;
    schedule.gather_wait_ms += result.gather_wait_ms;
    optimizer_ms += step_optimizer_ms;
    schedule.sent_bytes += result.sent_bytes;
  }
};

/// One run of run_training, its jobs as named steps: set-up (resume, optimizer, executor hooks), then per step the
/// schedule, the agreed gradient statistics, the optimizer step, the step's log line, eval, checkpoint and stop
/// signal, and the end-of-run summary.
class TrainingRun {
 public:
  explicit TrainingRun(LoopContext& ctx)
      : ctx_(ctx),
        spec_(ctx.spec),
        // optimizer.distributed shards AdamW's state over the replicas; with one replica it has nothing to shard.
        distributed_(spec_.optimizer.distributed && ctx.data_parallel != nullptr),
        gradients_(ctx.stages, ctx.data_parallel, spec_.model.tie_embeddings ? ctx.embedding : nullptr,
                   optim::bucket_size_of(spec_.runtime.grad_bucket_size, ctx.dp_size), distributed_),
        sequences_per_step_(ctx.dp_size * spec_.pipeline.microbatches * spec_.pipeline.micro_batch_size),
        actions_(ctx.program.ranks.at(static_cast<size_t>(ctx.rank))),
        num_stages_(static_cast<int64_t>(ctx.program.stage_to_rank.size())) {
    if (spec_.optimizer.distributed && !distributed_ && ctx.global_rank == 0) {
      spdlog::info("note: optimizer.distributed shards over the data-parallel group; with dp 1 there is nothing to "
                   "shard, so every rank keeps its whole AdamW state as without it");
    }
    check_injection(ctx.inject_nan, num_stages_, ctx.dp_size, std::max<int64_t>(spec_.pipeline.tensor_parallel, 1));
    make_optimizer();
    if (ctx.comm != nullptr) norm_groups_.push_back(ctx.comm);
    // t > 1: each tp rank counted its shards (and tp rank 0 the replicated parameters and the loss): summed whole.
    if (ctx.tensor_parallel != nullptr) norm_groups_.push_back(ctx.tensor_parallel);
    // Last, so that nothing can throw between here and the destructor that detaches them again.
    ctx.executor.set_gradient_reduction(&gradients_);
    ctx.executor.set_parameter_gather(sharded_);  // each F waits for its stage's updated weights
  }
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;
  ~TrainingRun() {  // the executor outlives this run's buffers
    ctx_.executor.set_gradient_reduction(nullptr);
    ctx_.executor.set_parameter_gather(nullptr);
  }

  TrainingEnd run() {
    const int64_t first_step = seek_resume_position();
    if (ctx_.observer) ctx_.observer->on_start(first_step);
    TrainingEnd end{first_step, 0, false};
    interval_start_ = Clock::now();
    for (int64_t step = first_step; step < ctx_.steps; ++step) {
      const auto step_start = Clock::now();
      if (ctx_.progress) ctx_.progress->step.store(step + 1, std::memory_order_relaxed);
      auto result = run_schedule(step);
      const auto schedule_end = Clock::now();
      const auto stats = agree_gradient_stats(step, result);
      if (!ctx_.dump_gradients_dir.empty()) {
        dump(result, stats.norm());
        return {step, 0, false};
      }
      const bool finite = stats.finite();
      double optimizer_ms = 0.0;
      const double lr = optimizer_step(step, finite, optimizer_ms);
      if (ctx_.observer) ctx_.observer->on_step(step, result, lr, stats.norm(), !finite, step_start, schedule_end);
      ++interval_steps_;
      if (step > first_step) timing_.add(result, ms_between(step_start, schedule_end), optimizer_ms);
      log_step(step, first_step, result, stats.norm(), finite, step_start);
      evaluate_if_due(step);
      const bool saved = checkpoint_if_due(step, lr);
      end.steps_done = step + 1;
      if (const int sig = stats.stop_signal(); sig != 0 && step + 1 < ctx_.steps) {
        end.stop_signal = sig;
        end.checkpointed = stop_on_signal(ctx_, sig, step + 1, saved, [&] {
          mark(comm::Phase::Checkpoint);
          save(step + 1, lr);
        });
        break;
      }
    }
    finish();
    return end;
  }

 private:
  /// A checkpoint loads into the fp32 parameters and an AdamW over them (its per-parameter format); the step's
  /// optimizer then takes the weights and its share of the moments from there: AdamW over every parameter, or
  /// over this replica's shard (then the parameters move into buffers laid out as the gradients'); over the
  /// parameters themselves, or over fp32 main copies of them (runtime.precision bf16-params: the parameters
  /// become bf16 here).
  void make_optimizer() {
    std::unique_ptr<torch::optim::AdamW> loaded;
    if (!ctx_.resume_from.empty()) {
      meta_ = read_checkpoint_meta(ctx_.resume_from);
      check_resumable(meta_, spec_, sequences_per_step_, ctx_.steps, ctx_.resume_from);
      loaded = optim::make_optimizer(ctx_.stages, spec_.optimizer);
      // Under torchrun and Slurm each rank checks only the files it reads (the local launcher checks them all
      // before it starts anyone): every rank learns whether all of them loaded before any goes on into a step
      // that its peers will not take.
      std::exception_ptr failure;
      try {
        load_checkpoint(ctx_.resume_from, meta_, ctx_.stages, *loaded);
      } catch (...) {
        failure = std::current_exception();
      }
      const int64_t failed = ranks_where(failure != nullptr);
      if (failure) std::rethrow_exception(failure);
      if (failed > 0) {
        throw CheckpointError(fmt::format(
            "{}: {} other rank(s) of the job could not load their part of this checkpoint, so this rank stops "
            "before training (their errors name the file and the fix)",
            ctx_.resume_from, failed));
      }
    }
    const bool bf16_weights = spec_.runtime.precision == config::Precision::Bf16Params;
    if (distributed_) {
      auto owner = std::make_unique<optim::DistributedOptimizer>(ctx_.stages, gradients_, *ctx_.data_parallel,
                                                                 spec_.optimizer, spec_.runtime.overlap_param_gather,
                                                                 bf16_weights, loaded.get());
      sharded_ = owner.get();
      optimizer_ = std::move(owner);
    } else {
      optimizer_ = std::make_unique<optim::ReplicatedOptimizer>(ctx_.stages, spec_.optimizer, bf16_weights,
                                                                loaded.get());
    }
  }

  /// How many ranks of the job say `yes`: summed over the tensor-parallel, pipeline and data-parallel groups in
  /// turn, which counts every rank of the tp x dp x pp grid once, the same answer on every rank. Collective over
  /// every rank (each group's timeout bounds it).
  int64_t ranks_where(bool yes) {
    double count = yes ? 1.0 : 0.0;
    for (auto* group : {ctx_.tensor_parallel, ctx_.comm, ctx_.data_parallel}) {
      if (group != nullptr) count = group->all_reduce_sum({count}).at(0);
    }
    return static_cast<int64_t>(count);
  }

  /// The first step to run: 0, or the checkpoint's step, with the dataset moved to the data position the
  /// checkpoint recorded (one text source: next_sample).
  int64_t seek_resume_position() {
    if (ctx_.dataset != nullptr) ctx_.dataset->set_samples_per_step(sequences_per_step_);
    if (ctx_.resume_from.empty()) return 0;
    if (ctx_.dataset != nullptr) {
      ctx_.dataset->seek(meta_.data_counts.empty() ? data::BlendPosition{meta_.next_sample, {meta_.next_sample}}
                                                   : data::BlendPosition{meta_.next_sample, meta_.data_counts});
    }
    spdlog::info("resumed from {} after step {} (saved with {} stage(s); next training sequence {})",
                 ctx_.resume_from, meta_.step, meta_.stages, meta_.next_sample);
    return meta_.step;
  }

  void mark(comm::Phase phase) const {  // for the launcher's stall report
    if (ctx_.progress) ctx_.progress->phase.store(static_cast<int>(phase), std::memory_order_relaxed);
  }

  /// The schedule over this replica's share of the global batch; returns once the gradients are reduced (run_step
  /// waited for the reduction: averaged over the replicas, tied copies summed, as Megatron-LM's
  /// finalize_model_grads does after its schedule), with every replica's last stage holding the global batch's
  /// loss sum and count.
  runtime::StepResult run_schedule(int64_t step) {
    mark(comm::Phase::Schedule);
    gradients_.zero();
    model::DropoutContext dropout{true, spec_.train.seed, step, ctx_.dp_rank * spec_.pipeline.microbatches};
    // Per token over the global batch: each replica's loss sums over the step's target tokens of every replica.
    const double scale = loss_scale(step_target_tokens(ctx_.dataset, spec_, step, ctx_.dp_size), ctx_.dp_size);
    auto result = ctx_.executor.run_step(
        actions_, microbatch_source(ctx_.dataset, spec_, step, ctx_.dp_rank, ctx_.dp_size), dropout, scale);
    mark(comm::Phase::GradientSync);
    if (ctx_.data_parallel != nullptr && result.loss_microbatches > 0) {
      const auto sums = ctx_.data_parallel->all_reduce_sum({result.loss_sum, static_cast<double>(result.loss_count)});
      result.loss_sum = sums[0];
      result.loss_count = static_cast<int64_t>(sums[1]);
    }
    return result;
  }

  /// The step's global loss and gradient statistics, the same on every rank so that every rank decides alike
  /// (nobody is left waiting in the next step's communication); then train.on_nonfinite for a non-finite step
  /// (the gradients discarded) or clipping to optimizer.clip_grad_norm.
  optim::GradientStats agree_gradient_stats(int64_t step, const runtime::StepResult& result) {
    // The gradients this rank answers for in the global norm: its stages' (the tied copy once), or its shard.
    const auto owned = optimizer_->owned_gradients();
    if (ctx_.inject_nan && ctx_.inject_nan->step == step + 1 &&
        (!ctx_.inject_nan->replica || *ctx_.inject_nan->replica == ctx_.dp_rank) &&
        (!ctx_.inject_nan->tp_rank || *ctx_.inject_nan->tp_rank == ctx_.tp_rank)) {
      poison_gradients(owned, ctx_.inject_nan->stage);
    }
    // The step's first microbatch with a non-finite loss, numbered over every replica (d x m + k).
    const int64_t bad_microbatch = result.first_nonfinite_microbatch < 0
                                       ? -1
                                       : ctx_.dp_rank * spec_.pipeline.microbatches + result.first_nonfinite_microbatch;
    auto stats = optim::local_gradient_stats(ctx_.stages, owned, num_stages_, result.loss_sum, result.loss_microbatches,
                                             bad_microbatch);
    stats.request_stop(ctx_.stop_signal ? ctx_.stop_signal() : 0);
    optim::reduce_gradient_stats(stats, norm_groups_);
    if (ctx_.data_parallel != nullptr) {
      optim::agree_over_replicas(stats, *ctx_.data_parallel, ctx_.dp_rank, ctx_.dp_size);
    }
    if (sharded_) optim::sum_over_shards(stats, *ctx_.data_parallel);  // each replica summed its shard only
    if (!stats.finite()) {
      handle_nonfinite(spec_.train.on_nonfinite, stats, step, ctx_.steps);
      gradients_.zero();
      ++skipped_steps_;
    } else if (spec_.optimizer.clip_grad_norm > 0) {
      gradients_.scale(optim::clip_coefficient(stats.norm(), spec_.optimizer.clip_grad_norm));
    }
    return stats;
  }

  /// --dump-gradients: every replica's gradients whole again (sharded), written for the parity tests.
  void dump(const runtime::StepResult& result, double grad_norm) {
    gradients_.gather_shards();
    dump_gradients(ctx_.stages, result.loss_sum, result.loss_count, grad_norm,
                   fmt::format("{}/rank{}.pt", ctx_.dump_gradients_dir, ctx_.global_rank));
  }

  /// Sets the step's learning rate (once per optimizer step, whatever the number of microbatches) and, for a
  /// finite step, steps AdamW (sharded: on the shard, then the parameters all-gathered). Returns the rate.
  double optimizer_step(int64_t step, bool finite, double& optimizer_ms) {
    mark(comm::Phase::Optimizer);
    const double lr = optim::learning_rate(spec_.optimizer, step, ctx_.steps);
    for (auto& group : optimizer_->local().param_groups()) group.options().set_lr(lr);
    const auto start = Clock::now();
    if (finite) optimizer_->step();
    optimizer_ms = ms_between(start, Clock::now());
    return lr;
  }

  /// The step line (see run_training), logged by replica 0's last stage every train.log_interval steps and at
  /// the first and last; tokens/s counts the steps since the last line.
  void log_step(int64_t step, int64_t first_step, const runtime::StepResult& result, double grad_norm, bool finite,
                Clock::time_point step_start) {
    const auto now = Clock::now();
    const bool log_now = step == first_step || step + 1 == ctx_.steps || (step + 1) % spec_.train.log_interval == 0;
    if (result.loss_microbatches > 0 && ctx_.dp_rank == 0 && ctx_.tp_rank == 0 && log_now) {
      const double elapsed = std::chrono::duration<double>(now - interval_start_).count();
      const double step_time = std::chrono::duration<double>(now - step_start).count();
      const int64_t tokens_per_step = sequences_per_step_ * spec_.model.seq_len;
      spdlog::info(
          "step {}/{} | loss {:.4f} | lr {:.6g} | grad norm {:.4g} | {:.0f} tok/s | "
          "step {:.3f} s{}{}",
          step + 1, ctx_.steps, runtime::step_loss(result),
          optimizer_->local().param_groups().front().options().get_lr(), grad_norm,
          static_cast<double>(tokens_per_step * interval_steps_) / elapsed, step_time,
          ctx_.observer ? ctx_.observer->log_suffix() : "", finite ? "" : " | skipped");
    }
    if (log_now) {
      interval_start_ = now;
      interval_steps_ = 0;
    }
  }

  /// The held-out loss after step `step` + 1 when eval.interval says so (eval.hpp).
  void evaluate_if_due(int64_t step) {
    if (!eval_due(spec_.eval, step + 1, ctx_.steps)) return;
    mark(comm::Phase::Eval);
    const auto eval_start = Clock::now();
    const auto loss = evaluate(ctx_.executor, actions_, ctx_.dataset, spec_, ctx_.dp_rank, ctx_.dp_size,
                               ctx_.data_parallel);
    if (loss && ctx_.dp_rank == 0 && ctx_.tp_rank == 0) {
      spdlog::info("eval after step {}: loss {:.4f} ({} held-out batch(es), {:.2f} s)", step + 1, *loss,
                   spec_.eval.batches, std::chrono::duration<double>(Clock::now() - eval_start).count());
      if (ctx_.observer) ctx_.observer->on_eval(step + 1, *loss, spec_.eval.batches);
    }
    interval_start_ = Clock::now();  // tokens/s counts training only
  }

  /// A checkpoint of step `step` + 1 every checkpoint.interval steps and after the last; returns whether one was
  /// written.
  bool checkpoint_if_due(int64_t step, double lr) {
    const auto interval = spec_.checkpoint.interval;
    const bool due = !spec_.checkpoint.dir.empty() &&
                     (step + 1 == ctx_.steps || (interval > 0 && (step + 1) % interval == 0));
    if (due) {
      mark(comm::Phase::Checkpoint);
      save(step + 1, lr);
      interval_start_ = Clock::now();
    }
    return due;
  }

  /// Replicas hold the same weights: the first one (dp rank 0) writes. The distributed optimizer's moments (and
  /// fp32 main parameters) are gathered first, over the replicas, into this rank's tensors on the CPU (the same
  /// format); fp32 main parameters are written in place of bf16 weights. At t > 1 every tp rank of replica 0
  /// writes its own shards (nothing is gathered over the tp group); checkpoint::load_checkpoint recuts them at any t.
  void save(int64_t step, double lr) {
    const auto state = optimizer_->checkpoint_state(ctx_.stages);
    if (ctx_.dp_rank != 0) return;
    const optim::SeatedWeights seated(ctx_.stages, state.weights);
    const CheckpointWriter writer{spec_,     ctx_.stages,         *state.optimizer,
                                  ctx_.rank, ctx_.comm,           sequences_per_step_,
                                  ctx_.crash_in_checkpoint,       ctx_.steps};
    save_checkpoint(writer, step, lr);
  }

  /// Every weight current before anything reads them (hashes, export); then the timing summary, the tied
  /// weights' check, the state's bytes per parameter (what plan's static columns estimate, measured: tests
  /// compare them with Megatron-Core's) and the skipped steps.
  void finish() {
    mark(comm::Phase::Finishing);
    optimizer_->wait_all();
    if (timing_.steps > 0) {
      log_timing(timing_.schedule, timing_.step_ms, timing_.optimizer_ms, timing_.steps,
                 schedule::simulate(ctx_.program, {}).bubble_fraction.at(static_cast<size_t>(ctx_.rank)),
                 spec_.runtime.device == config::Device::Cpu);
    }
    log_tied_weights(ctx_.stages, *optimizer_);
    int64_t parameters = 0, weight_bytes = 0;
    for (const auto& stage : ctx_.stages) {
      for (const auto& p : stage->parameters()) {
        parameters += p.numel();
        weight_bytes += static_cast<int64_t>(p.nbytes());
      }
    }
    const int64_t state_bytes = optim::adamw_state_bytes(optimizer_->local());
    const int64_t main_bytes = optimizer_->main_parameter_bytes();
    const auto per_parameter = [&](int64_t bytes) {
      return static_cast<double>(bytes) / static_cast<double>(std::max<int64_t>(parameters, 1));
    };
    spdlog::info("AdamW state on this rank: {} bytes for {} parameters ({:.2f} B per parameter{}); weights {} bytes, "
                 "gradient buffers {} bytes, fp32 main parameters {} bytes ({:.2f} B per parameter in all, precision "
                 "{})",
                 state_bytes, parameters, per_parameter(state_bytes),
                 sharded_ ? fmt::format(", sharded over dp {}", ctx_.dp_size) : "", weight_bytes, gradients_.bytes(),
                 main_bytes, per_parameter(weight_bytes + gradients_.bytes() + state_bytes + main_bytes),
                 config::to_string(spec_.runtime.precision));
    if (skipped_steps_ > 0) {
      spdlog::warn("{} of {} optimizer steps skipped for non-finite values (train.on_nonfinite: skip)", skipped_steps_,
                   ctx_.steps);
    }
  }

  LoopContext& ctx_;
  const config::JobSpec& spec_;
  const bool distributed_;
  optim::GradientBuffers gradients_;
  const int64_t sequences_per_step_;  ///< the global batch
  const schedule::RankProgram& actions_;  ///< this rank's actions
  const int64_t num_stages_;
  checkpoint::CheckpointMeta meta_;  ///< of ctx.resume_from, when set
  std::unique_ptr<optim::StepOptimizer> optimizer_;
  optim::DistributedOptimizer* sharded_ = nullptr;  ///< optimizer_, when it is the distributed one
  std::vector<comm::Communicator*> norm_groups_;   ///< the norm is summed over these (the pipeline)
  TimingTotals timing_;
  int64_t skipped_steps_ = 0;
  Clock::time_point interval_start_;  ///< of the tokens/s interval
  int64_t interval_steps_ = 0;
};

}  // namespace

TrainingEnd run_training(LoopContext& ctx) {
  TrainingRun run(ctx);
  return run.run();
}

}  // namespace ppctl::train
