// Building and checking the program of a job.
#include "schedule/job_program.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "core/error.hpp"
#include "schedule/csv.hpp"
#include "schedule/generate.hpp"
#include "schedule/validate.hpp"

namespace ppctl::schedule {

namespace {

/// What to change in the spec so that it matches the file's geometry.
std::string geometry_fix(const config::PipelineSpec& p, const Program& file) {
  std::vector<std::string> fixes;
  if (file.num_ranks() != p.stages) fixes.push_back(fmt::format("pipeline.stages: {}", file.num_ranks()));
  if (file.num_ranks() > 0 && file.num_stages % file.num_ranks() == 0 &&
      file.num_stages / file.num_ranks() != p.virtual_stages) {
    fixes.push_back(fmt::format("pipeline.virtual_stages: {}", file.num_stages / file.num_ranks()));
  }
  if (file.num_microbatches != p.microbatches) {
    fixes.push_back(fmt::format("pipeline.microbatches: {}", file.num_microbatches));
  }
  return fixes.empty() ? "make the file and the spec agree"
                       : fmt::format("set {} to match the file", fmt::join(fixes, ", "));
}

}  // namespace

Program job_program(const config::JobSpec& spec, const std::string* schedule_text) {
  Program program;
  if (spec.pipeline.schedule == config::ScheduleKind::Custom) {
    const auto compute = schedule_text ? parse_csv(*schedule_text, spec.pipeline.schedule_file)
                                       : read_csv(spec.pipeline.schedule_file);
    const int64_t stages = spec.pipeline.stages * spec.pipeline.virtual_stages;
    if (compute.num_ranks() != spec.pipeline.stages || compute.num_stages != stages ||
        compute.num_microbatches != spec.pipeline.microbatches) {
      throw ScheduleError(fmt::format(
          "{}: the schedule has {} rank rows, {} stages and {} microbatches, but the spec asks for "
          "pipeline.stages = {} ranks, {} stages (stages x virtual_stages) and "
          "pipeline.microbatches = {} (fix: {})",
          spec.pipeline.schedule_file, compute.num_ranks(), compute.num_stages,
          compute.num_microbatches, spec.pipeline.stages, stages, spec.pipeline.microbatches,
          geometry_fix(spec.pipeline, compute)));
    }
    program = add_communication(compute);
  } else {
    program = generate(schedule_params(spec));
  }
  if (spec.runtime.overlap_grad_reduce) program = add_gradient_reduction(program);
  validate(program);
  return program;
}

}  // namespace ppctl::schedule
