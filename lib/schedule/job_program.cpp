// Building and checking the program of a job.
#include "schedule/job_program.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "schedule/csv.hpp"
#include "schedule/generate.hpp"
#include "schedule/validate.hpp"

namespace ppctl::schedule {

Program job_program(const config::JobSpec& spec) {
  Program program;
  if (spec.pipeline.schedule == config::ScheduleKind::Custom) {
    const auto compute = read_csv(spec.pipeline.schedule_file);
    const int64_t stages = spec.pipeline.stages * spec.pipeline.virtual_stages;
    if (compute.num_ranks() != spec.pipeline.stages || compute.num_stages != stages ||
        compute.num_microbatches != spec.pipeline.microbatches) {
      throw ScheduleError(fmt::format(
          "{}: the schedule has {} rank rows, {} stages and {} microbatches, but the spec asks for "
          "pipeline.stages = {} ranks, {} stages (stages x virtual_stages) and "
          "pipeline.microbatches = {} (fix: make the file and the spec agree)",
          spec.pipeline.schedule_file, compute.num_ranks(), compute.num_stages,
          compute.num_microbatches, spec.pipeline.stages, stages, spec.pipeline.microbatches));
    }
    program = add_communication(compute);
  } else {
    program = generate(schedule_params(spec));
  }
  validate(program);
  return program;
}

}  // namespace ppctl::schedule
