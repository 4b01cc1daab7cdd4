// Worker process set-up: threads, identity, spec, schedule, process group, this rank's stages.
#include "job/worker.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "comm/communicator.hpp"
#include "comm/failure_report.hpp"
#include "comm/progress_board.hpp"
#include "comm/rendezvous.hpp"
#include "config/load.hpp"
#include "core/check.hpp"
#include "core/error.hpp"
#include "core/host_memory.hpp"
#include "core/log.hpp"
#include "interop/hf_load.hpp"
#include "launch/stop_signals.hpp"
#include "launch/worker_signals.hpp"
#include "observe/observer.hpp"
#include "observe/run_dir.hpp"
#include "plan/layout.hpp"
#include "plan/parallel.hpp"
#include "schedule/csv.hpp"
#include "schedule/job_program.hpp"
#include "schedule/split_time.hpp"
#include "comm/worker_groups.hpp"
#include "train/loop.hpp"

namespace ppctl::job {
using observe::RunObserver;
using observe::run_directory_from_env;
namespace {

/// How long a stopped worker tries to reach the launcher's store: it is on this machine and up.
constexpr std::chrono::milliseconds kStopReportTimeout{3000};

torch::Device worker_device(const config::JobSpec& spec, int local_rank) {
  if (spec.runtime.device == config::Device::Cpu) return torch::kCPU;
  check_device_available(spec);
  const auto count = static_cast<int>(torch::cuda::device_count());
  if (local_rank >= count) {
    throw Error(fmt::format("local rank {} needs GPU {}, but only {} are visible (fix: start at "
                            "most one worker per GPU per node)",
                            local_rank, local_rank, count));
  }
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank)};
}

comm::BackendKind backend_kind(const config::RuntimeSpec& runtime) {
  switch (runtime.backend) {
    case config::Backend::Gloo: return comm::BackendKind::Gloo;
    case config::Backend::Nccl: return comm::BackendKind::Nccl;
    case config::Backend::Auto: break;
  }
  return runtime.device == config::Device::Cuda ? comm::BackendKind::Nccl : comm::BackendKind::Gloo;
}

/// The spec as the launcher validated it (`texts`), else as the file at `path` holds it, with the same
/// command-line overrides (so train.steps is the effective step count). Relative data paths are resolved
/// against the folder of `path` either way.
config::JobSpec load_spec(const std::string& path, const std::optional<JobTexts>& texts,
                          const config::SpecOverrides& overrides) {
  if (!texts) return config::load_job_spec(path, overrides);
  return config::parse_job_spec(texts->spec, path, std::filesystem::absolute(path).parent_path().string(),
                                overrides);
}

/// The launcher's plan and this worker's program must agree (a schedule file edited after launch).
void check_planned_program(const schedule::Program& program) {
  const char* expected = std::getenv(kProgramHashVariable);
  if (expected == nullptr) return;
  const auto mine = fmt::format("{:016x}", schedule::program_hash(program));
  if (mine != expected) {
    throw ScheduleError(fmt::format(
        "this rank's schedule (hash {}) differs from the one the launcher planned (hash {}): was "
        "the schedule file changed after launch? (fix: leave job files unchanged while a job runs)",
        mine, expected));
  }
}

/// Every rank must run the same program: compare hashes before step 1.
void check_same_program(comm::Communicator& comm, const schedule::Program& program) {
  const auto mine = static_cast<int64_t>(schedule::program_hash(program));
  const auto all = comm.all_gather(mine);
  std::vector<int> differing;
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != all[0]) differing.push_back(static_cast<int>(r));
  if (!differing.empty()) {
    throw ScheduleError(fmt::format(
        "the schedule differs between ranks: rank(s) {} disagree with rank 0 (fix: give every rank "
        "the same job spec and schedule file)",
        fmt::join(differing, ", ")));
  }
}

}  // namespace

void check_device_available(const config::JobSpec& spec) {
  if (spec.runtime.device == config::Device::Cuda && !torch::cuda::is_available()) {
    throw PlanError(fmt::format("{}: runtime.device is cuda but no CUDA device is visible on this "
                                "machine (fix: run on a GPU node, or set runtime.device: cpu)",
                                spec.source));
  }
}

int run_worker(const WorkerOptions& options) {
  const auto run_dir = options.identity ? options.run_dir : run_directory_from_env();
  if (const char* rank = std::getenv("RANK"); run_dir && rank != nullptr && !options.identity) {
    core::add_log_file(fmt::format("{}/rank{}.log", *run_dir, rank));
  }
  const auto texts = options.texts ? options.texts : handed_over_texts();
  auto spec = load_spec(options.spec_path, texts, {options.steps});
  // Thread counts first, before anything starts a parallel region (DESIGN.md).
  at::set_num_threads(static_cast<int>(spec.runtime.threads_per_worker));
  at::set_num_interop_threads(1);
  // Memory a step frees stays for the next step (no page faults per step for its activations).
  const auto host_memory = core::keep_freed_host_memory();
  if (host_memory.applied) {
    spdlog::debug("{}", host_memory.description);
  } else {
    spdlog::info("{}", host_memory.description);
  }

  const auto info = options.identity ? *options.identity : comm::rendezvous_from_env();
  spec.pipeline.data_parallel = plan::resolve_data_parallel(spec, info.world_size);
  const std::string* schedule_text = texts && texts->schedule ? &*texts->schedule : nullptr;
  const auto program = schedule::job_program(spec, schedule_text);
  check_planned_program(program);
  const auto layout = schedule::job_layout(spec, program);
  PPCTL_ASSERT(info.world_size == layout.world_size, "world size differs from dp x pp");
  const auto coords = layout.grid().coords(info.rank);

  const auto device = worker_device(spec, info.local_rank);
  const auto timeout = std::chrono::milliseconds(
      static_cast<int64_t>(spec.runtime.comm_timeout_s * 1000.0));
  auto groups = comm::make_worker_groups(info, layout, spec.model.tie_embeddings,
                                          backend_kind(spec.runtime), timeout, device, options.store.get());
  for (auto* group : {groups.tensor_parallel.get(), groups.pipeline.get(), groups.data_parallel.get()}) {
    if (group != nullptr) check_same_program(*group, program);
  }
  const model::TensorParallel tp{layout.tensor_parallel, coords.tp, groups.tensor_parallel.get(),
                                 spec.pipeline.sequence_parallel};
  comm::Communicator* comm = groups.pipeline.get();
  // Progress for the launcher's stall report: the store exists now (the groups are built on it);
  // a job of one rank has no store and no peer to blame.
  comm::ProgressCursor progress;
  const auto& my_actions = program.ranks.at(static_cast<size_t>(coords.pp));
  std::unique_ptr<comm::ProgressPublisher> publisher;
  if (info.world_size > 1) {
    publisher = std::make_unique<comm::ProgressPublisher>(
        info, timeout, progress,
        [&my_actions](int64_t position) {
          return position >= 0 && static_cast<size_t>(position) < my_actions.size()
                     ? schedule::to_string(my_actions[static_cast<size_t>(position)])
                     : std::string("?");
        },
        static_cast<int64_t>(my_actions.size()));
  }

  std::map<int64_t, model::StageModule> by_stage;
  std::vector<model::StageModule> stages;
  bool needs_data = false;
  for (const auto& s : layout.stages) {
    if (s.rank != coords.pp) continue;
    model::StageModule stage(spec.model, s, spec.train.seed, tp);
    if (!spec.model.init_from.empty()) interop::load_hf_weights(spec.model.init_from, spec.model, s, *stage);
    stage->to(device);
    stage->set_precision(spec.runtime.precision);
    stage->train();
    by_stage.emplace(s.stage, stage);
    stages.push_back(stage);
    needs_data = needs_data || s.has_embedding || s.has_head;
    int64_t held = 0;  // this rank's: at t > 1 its shards and the replicated parameters
    for (const auto& p : stage->parameters()) held += p.numel();
    spdlog::info("stage {} (blocks [{}, {})){}{}: {} parameters on {}{}", s.stage, s.layers.begin, s.layers.end,
                 s.has_embedding ? ", embedding" : "", s.has_head ? ", head + loss" : "", held, device.str(),
                 tp.active() ? fmt::format(" (tp rank {} of {}; the stage has {})", tp.rank, tp.size, s.parameters)
                             : "");
  }
  std::unique_ptr<data::Dataset> dataset;
  if (needs_data || data::has_chat_data(spec)) {  // packed conversations: every stage needs their boundaries
    dataset = std::make_unique<data::Dataset>(spec);
  }

  // With sequence parallelism each tp rank sends and receives its seq_len / t positions.
  const auto positions = model::sequence_range(spec.model.seq_len, tp);
  runtime::Executor executor(by_stage, program, static_cast<int>(coords.pp), comm,
                             {spec.pipeline.micro_batch_size, positions.second - positions.first, spec.model.hidden},
                             device, {spec.train.recompute, spec.train.recompute_every},
                             runtime::p2p_torch_dtype(spec.runtime));
  const int64_t steps = spec.train.steps;  // --steps applied by load_spec
  const bool records = coords.dp == 0 && coords.tp == 0;  // replica 0's first tp rank writes the run's records
  RunObserver observer(spec, program, static_cast<int>(coords.pp), device, records ? run_dir : std::nullopt, steps,
                       records);
  executor.set_trace(&observer.trace());
  executor.set_progress(&progress.position);
  train::LoopContext ctx{spec,   program,       static_cast<int>(coords.pp), executor, stages, dataset.get(),
                  steps, options.dump_gradients_dir, comm, options.inject_nan, &observer};
  ctx.resume_from = options.resume_from;
  ctx.crash_in_checkpoint = options.crash_in_checkpoint;
  ctx.data_parallel = groups.data_parallel.get();
  ctx.dp_rank = coords.dp;
  ctx.dp_size = layout.data_parallel;
  ctx.tensor_parallel = groups.tensor_parallel.get();
  ctx.tp_rank = coords.tp;
  ctx.global_rank = info.rank;
  ctx.embedding = groups.embedding.get();
  ctx.progress = &progress;
  ctx.stop_signal = &launch::WorkerSignalScope::caught;
  launch::WorkerSignalScope::defer_to_step_boundary();  // a stop signal now waits for a step boundary
  train::TrainingEnd end;
  try {
    end = train::run_training(ctx);
  } catch (...) {
    observer.write_trace_part();  // what ran until the failure
    throw;
  }
  if (end.stop_signal != 0)
    observer.set_stopped(end.steps_done, launch::stop_signal_name(end.stop_signal), end.checkpointed);
  observer.finish(comm);
  spdlog::info("memory: max resident set {:.1f} MiB; {}",
               static_cast<double>(runtime::max_resident_bytes()) / (1024.0 * 1024.0),
               executor.memory_report());
  for (auto* group : {groups.tensor_parallel.get(), groups.pipeline.get(), groups.data_parallel.get()}) {
    if (group != nullptr) group->barrier();
  }
  if (end.stop_signal == 0) return 0;
  const int code = end.checkpointed ? launch::kExitStoppedResumable : 128 + end.stop_signal;
  // Its stop is complete (checkpoint written, last barrier passed): a second signal to the local launcher while
  // this process exits then ends the job with this code rather than as a failure. Under torchrun or Slurm
  // (`identity`) no launcher of ours reads the store.
  if (!options.identity) comm::publish_stop(info, kStopReportTimeout, code);
  spdlog::info("stop complete: exiting with code {}", code);
  return code;
}

}  // namespace ppctl::job
