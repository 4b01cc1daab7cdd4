// RunObserver: trace, metrics.jsonl, progress line and peak memory of one worker.
#include "observe/observer.hpp"

#include <ATen/cuda/CUDAContext.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "observe/tensorboard_scalars.hpp"
#include "plan/parallel.hpp"
#include "runtime/memory.hpp"

namespace ppctl::observe {
namespace {

/// Peak TFLOP/s per device for MFU (see RunObserver's constructor): the known GPU's bf16 tensor-core
/// figure with runtime.precision bf16, its fp32 figure otherwise.
std::optional<double> peak_tflops(const config::ObserveSpec& observe, config::Precision precision,
                                  torch::Device device) {
  if (observe.peak_tflops > 0) return observe.peak_tflops;
  if (!device.is_cuda()) return std::nullopt;
  const std::string name = at::cuda::getDeviceProperties(device.index())->name;
  double bf16 = 0.0;
  const auto peak = known_peak_tflops(name, &bf16);
  if (peak && config::computes_in_bf16(precision)) return bf16;
  if (!peak) {
    spdlog::info("GPU '{}' is not in ppctl's table of peak FLOP/s: no MFU (fix: set "
                 "observe.peak_tflops)",
                 name);
  }
  return peak;
}

}  // namespace

RunObserver::RunObserver(const config::JobSpec& spec, const schedule::Program& program, int rank,
                         torch::Device device, std::optional<std::string> run_dir, int64_t steps,
                         bool first_replica)
    : spec_(spec),
      program_(program),
      rank_(rank),
      device_(device),
      run_dir_(std::move(run_dir)),
      steps_(steps),
      writes_metrics_(first_replica && !program.stage_to_rank.empty() &&
                      program.stage_to_rank.back() == rank),
      trace_(rank, run_dir_ ? spec.observe.trace_steps : 0),
      progress_(writes_metrics_ && stderr_is_terminal()) {
  if (writes_metrics_ && run_dir_) {
    metrics_ = std::make_unique<JsonlWriter>(
        (std::filesystem::path(*run_dir_) / "metrics.jsonl").string());
    if (spec.observe.tensorboard) {
      tensorboard_ = std::make_unique<interop::EventFileWriter>(std::filesystem::path(*run_dir_) /
                                                                kTensorBoardFolder);
      spdlog::info("TensorBoard event file {}", tensorboard_->path().string());
    }
  }
  const auto& p = spec.pipeline;
  last_.steps = steps;
  const int64_t dp = std::max<int64_t>(p.data_parallel, 1);  // resolved by the worker
  last_.tokens = dp * p.microbatches * p.micro_batch_size * spec.model.seq_len;
  last_.model_flops = model_flops_per_step(spec.model, dp * p.microbatches * p.micro_batch_size);
  last_.devices = dp * program.num_ranks();
  last_.peak_tflops = peak_tflops(spec.observe, spec.runtime.precision, device);
}

int64_t RunObserver::read_peak_memory() {
  const int64_t now = device_.is_cuda() ? runtime::MemoryMeter(device_).read().peak
                                        : runtime::max_resident_bytes();
  peak_memory_ = std::max(peak_memory_, now);
  return peak_memory_;
}

void RunObserver::on_step(int64_t step, const runtime::StepResult& result, double lr,
                          double grad_norm, bool skipped, Clock::time_point step_start,
                          Clock::time_point schedule_end) {
  const auto now = Clock::now();
  trace_.add(runtime::TraceRecorder::Kind::Phase, step, {}, schedule_end, now, "optimizer");
  // The recording window closes: write the part now, so a run stopped later (a rank killed, the
  // others then stopped by the launcher) still leaves it.
  if (step + 1 == spec_.observe.trace_steps) write_trace_part();
  read_peak_memory();
  if (step > 0) {  // the first step carries one-off start-up costs
    ++timing_.steps;
    timing_.schedule_ms += std::chrono::duration<double, std::milli>(schedule_end - step_start).count();
    for (size_t k = 0; k < timing_.compute_ms.size(); ++k) {
      timing_.compute_ms[k] += result.compute_ms[k];
      timing_.compute_count[k] += result.compute_count[k];
    }
  }
  if (!writes_metrics_) return;
  last_.step = step + 1;
  last_.loss = result.loss_microbatches > 0 ? runtime::step_loss(result) : std::nan("");
  last_.lr = lr;
  last_.grad_norm = grad_norm;
  last_.skipped = skipped;
  last_.step_time_s = std::chrono::duration<double>(now - step_start).count();
  last_.peak_memory_bytes = peak_memory_;
  last_.elapsed_s = std::chrono::duration<double>(now - start_).count();
  if (metrics_) metrics_->write(metrics_json_line(last_));
  if (tensorboard_) tensorboard_->write_scalars(last_.step, step_scalars(last_));
  // ETA from the mean of the steps after the first (which carries one-off start-up costs).
  if (step > 0) after_first_s_ += last_.step_time_s;
  const double mean_s = step > 0 ? after_first_s_ / static_cast<double>(step) : last_.step_time_s;
  progress_.update(last_.step, steps_, last_.loss, last_.tokens_per_s(),
                   mean_s * static_cast<double>(steps_ - last_.step));
}

void RunObserver::on_start(int64_t first_step) {
  if (tensorboard_) tensorboard_->write_session_start(first_step + 1);
}

void RunObserver::on_eval(int64_t step, double loss, int64_t batches) {
  if (!metrics_) return;
  nlohmann::json line{{"event", "eval"}, {"step", step}, {"batches", batches}};
  line["loss"] = std::isfinite(loss) ? nlohmann::json(loss) : nlohmann::json(nullptr);
  metrics_->write(line.dump());
  if (tensorboard_) tensorboard_->write_scalars(step, eval_scalars(loss));
}

std::string RunObserver::log_suffix() const {
  const auto mfu = last_.mfu();
  return mfu ? fmt::format(" | {:.3g} TFLOP/s | MFU {:.2f}%", last_.tflops(), 100.0 * *mfu)
             : fmt::format(" | {:.3g} TFLOP/s", last_.tflops());
}

void RunObserver::set_stopped(int64_t steps_done, std::string signal_name, bool checkpointed) {
  steps_ = steps_done;
  stopped_by_ = std::move(signal_name);
  checkpointed_ = checkpointed;
}

void RunObserver::finish(comm::Communicator* comm) {
  if (finished_) return;
  finished_ = true;
  progress_.finish();
  // Every rank's peak memory and timing in one all-reduce: each fills its own slot (peak, then the timing).
  constexpr size_t kSlot = 1 + kRankTimingValues;
  const auto ranks = static_cast<size_t>(program_.num_ranks());
  std::vector<double> mine(ranks * kSlot, 0.0);
  double* slot = &mine.at(static_cast<size_t>(rank_) * kSlot);
  slot[0] = static_cast<double>(read_peak_memory());
  pack_rank_timing(timing_, slot + 1);
  const auto all = comm != nullptr ? comm->all_reduce_sum(mine) : mine;
  if (writes_metrics_) {
    RunSummary summary;
    summary.steps = steps_;
    summary.stopped_by = stopped_by_;
    summary.checkpointed = checkpointed_;
    summary.memory_kind = device_.is_cuda() ? "cuda allocated" : "cpu max resident set";
    summary.stages.resize(ranks);
    for (size_t s = 0; s < program_.stage_to_rank.size(); ++s)
      summary.stages.at(static_cast<size_t>(program_.stage_to_rank[s])).push_back(static_cast<int64_t>(s));
    std::vector<RankTiming> timings(ranks);
    std::vector<std::string> mib;
    const plan::RankGrid grid(spec_.pipeline.tensor_parallel,
                              std::max<int64_t>(spec_.pipeline.data_parallel, 1),  // dp resolved by the worker
                              static_cast<int64_t>(ranks));
    for (size_t r = 0; r < ranks; ++r) {
      const double* v = &all[r * kSlot];
      summary.peak_memory_bytes.push_back(std::llround(v[0]));
      summary.ranks.push_back(grid.rank({0, 0, static_cast<int64_t>(r)}));
      mib.push_back(fmt::format("{:.1f}", v[0] / (1024.0 * 1024.0)));
      timings[r] = unpack_rank_timing(v + 1);
    }
    if (grid.world_size() == grid.size(plan::Axis::pipeline)) {
      spdlog::info("peak memory per rank ({}): {} MiB", summary.memory_kind, fmt::join(mib, ", "));
    } else {
      // Which pipeline the numbers are of, and who else runs its stages: tp rank 0 of replica 0 when tp > 1.
      const bool tp = grid.size(plan::Axis::tensor) > 1, dp = grid.size(plan::Axis::data) > 1;
      spdlog::info("peak memory of {}replica 0's pipeline, global ranks {} ({}): {} MiB (the other {} run the "
                   "same stages{})",
                   tp ? "tp rank 0 of " : "", fmt::join(summary.ranks, ", "), summary.memory_kind,
                   fmt::join(mib, ", "), tp && dp ? "tp ranks and replicas" : tp ? "tp ranks" : "replicas",
                   tp ? ", each with its shards" : "");
    }
    if (timing_.steps > 0) {
      summary.bubbles = compare_bubbles(program_, timings);
      spdlog::info("{}", format_bubble_report(*summary.bubbles));
      if (run_dir_) write_simulated_trace(timings);
    }
    if (metrics_) {
      metrics_->write(metrics_end_line(summary));
      if (tensorboard_) tensorboard_->write_scalars(summary.steps, end_scalars(summary));
      spdlog::info("metrics written to {}/metrics.jsonl", *run_dir_);
    }
  }
  write_trace_part();
}

void RunObserver::write_simulated_trace(const std::vector<RankTiming>& timings) const {
  const auto path = std::filesystem::path(*run_dir_) / "trace.simulated.json";
  try {
    core::write_file_atomically(
        path, schedule::to_chrome_trace(schedule::simulate(program_, measured_cost_model(program_, timings))));
  } catch (const Error& e) {
    spdlog::error("{}", e.what());
  }
}

void RunObserver::write_trace_part() noexcept {
  if (!run_dir_ || trace_.size() == 0) return;
  try {
    trace_.write((std::filesystem::path(*run_dir_) / runtime::trace_part_name(rank_)).string());
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
  }
}

}  // namespace ppctl::observe
