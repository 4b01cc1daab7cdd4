// Worker process set-up: threads, identity, spec, schedule, process group, this rank's stage.
#include "train/worker.hpp"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <memory>

#include "comm/communicator.hpp"
#include "comm/rendezvous.hpp"
#include "config/load.hpp"
#include "core/error.hpp"
#include "plan/layout.hpp"
#include "schedule/generate.hpp"
#include "schedule/validate.hpp"
#include "train/loop.hpp"

namespace ppctl::train {
namespace {

torch::Device worker_device(const config::JobSpec& spec, int local_rank) {
  if (spec.runtime.device == config::Device::Cpu) return torch::kCPU;
  if (!torch::cuda::is_available()) {
    throw Error(fmt::format("{}: runtime.device is cuda but no CUDA device is visible (fix: run on "
                            "a GPU node, or set runtime.device: cpu)",
                            spec.source));
  }
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

}  // namespace

int run_worker(const WorkerOptions& options) {
  // Thread counts first, before anything starts a parallel region (DESIGN.md).
  const auto spec = config::load_job_spec(options.spec_path);
  at::set_num_threads(static_cast<int>(spec.runtime.threads_per_worker));
  at::set_num_interop_threads(1);

  const auto info = comm::rendezvous_from_env();
  const auto layout = plan::make_layout(spec);
  if (info.world_size != layout.world_size) {
    throw CommError(fmt::format("WORLD_SIZE={} but {} needs {} ranks (pipeline.stages) (fix: start "
                                "exactly {} workers)",
                                info.world_size, spec.source, layout.world_size, layout.world_size));
  }
  const auto program = schedule::generate(spec.pipeline.schedule, spec.pipeline.stages,
                                          spec.pipeline.microbatches);
  schedule::validate(program);

  const auto device = worker_device(spec, info.local_rank);
  const auto timeout = std::chrono::milliseconds(
      static_cast<int64_t>(spec.runtime.comm_timeout_s * 1000.0));
  std::unique_ptr<comm::Communicator> comm;
  if (info.world_size > 1) comm = comm::Communicator::create(info, backend_kind(spec.runtime), timeout);

  const auto& my_stage = layout.stages.at(static_cast<size_t>(info.rank));
  model::StageModule stage(spec.model, my_stage, spec.train.seed);
  stage->to(device);
  stage->train();

  std::unique_ptr<data::TextDataset> dataset;
  if (my_stage.has_embedding || my_stage.has_head) {
    dataset = std::make_unique<data::TextDataset>(spec.data.files, spec.model.seq_len, spec.train.seed);
  }
  spdlog::info("stage {} (blocks [{}, {})){}{}: {} parameters on {}", my_stage.stage,
               my_stage.layers.begin, my_stage.layers.end,
               my_stage.has_embedding ? ", embedding" : "", my_stage.has_head ? ", head + loss" : "",
               my_stage.parameters, device.str());

  runtime::Executor executor({{my_stage.stage, stage}}, program, info.rank, comm.get(),
                             {spec.pipeline.micro_batch_size, spec.model.seq_len, spec.model.hidden},
                             device);
  LoopContext ctx{spec,  program, info.rank, executor, stage, dataset.get(),
                  options.steps.value_or(spec.train.steps), options.dump_gradients_dir};
  run_training(ctx);
  if (comm) comm->barrier();
  return 0;
}

}  // namespace ppctl::train
