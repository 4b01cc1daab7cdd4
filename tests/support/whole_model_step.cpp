// Test support: one step of a whole GPT as one stage on the calling thread (whole_model_step.hpp).
#include "support/whole_model_step.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include "plan/layout.hpp"
#include "schedule/job_program.hpp"

namespace ppctl::test {

WholeModelStep whole_model_step(const config::ModelSpec& model, int64_t microbatches, int64_t micro_batch_size,
                                runtime::RecomputePolicy recompute, runtime::ParameterGather* gather) {
  at::set_num_threads(1);
  config::JobSpec spec;
  spec.model = model;
  spec.pipeline.schedule = config::ScheduleKind::GPipe;
  spec.pipeline.microbatches = microbatches;
  spec.pipeline.micro_batch_size = micro_batch_size;
  const auto program = schedule::job_program(spec);
  const auto layout = plan::make_layout(spec, &program.stage_to_rank);
  model::StageModule stage(spec.model, layout.stages.at(0), /*seed=*/5);
  const int64_t seq_len = model.seq_len;
  runtime::Executor executor({{0, stage}}, program, 0, nullptr, {micro_batch_size, seq_len, model.hidden},
                             torch::kCPU, recompute);
  executor.set_parameter_gather(gather);
  const runtime::MicrobatchSource data = [&](int64_t microbatch) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(100 + microbatch));
    auto tokens = torch::randint(0, model.vocab_size, {micro_batch_size, seq_len + 1}, gen, torch::kLong);
    return runtime::MicrobatchData{tokens.slice(1, 0, seq_len), tokens.slice(1, 1, seq_len + 1)};
  };
  // the loss sums over the step's tokens: the mean over the batch, as train/loop.cpp scales them at dp 1
  const auto tokens = static_cast<double>(microbatches * micro_batch_size * seq_len);
  auto result = executor.run_step(program.ranks.at(0), data, {true, 5, 0, 0}, 1.0 / tokens);
  return {std::move(result), stage};
}

}  // namespace ppctl::test
