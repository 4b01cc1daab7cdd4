// prepare_job: read, validate and plan a job once, for the launcher and `ppctl plan` (torch-free).
#include "job/prepared_job.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "config/load.hpp"
#include "core/atomic_file.hpp"
#include "data/check_data.hpp"
#include "interop/hf_folder.hpp"
#include "schedule/csv.hpp"
#include "schedule/job_program.hpp"
#include "schedule/split_time.hpp"

namespace ppctl::job {
namespace {

/// A custom schedule's CSV text, or nothing when it is a folder or cannot be opened (job_program then reads
/// the file itself and reports why).
std::optional<std::string> read_schedule_text(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

PreparedJob prepare_job(const std::string& spec_path, const config::SpecOverrides& overrides) {
  // Read once, whole, at most config::kMaxSpecBytes (an unreadable or oversized file: the loader's message).
  std::string text = config::read_spec_file(spec_path);
  auto spec = config::parse_job_spec(text, spec_path, std::filesystem::absolute(spec_path).parent_path().string(),
                                     overrides);
  data::check_data(spec, text);  // files, index, windows, token ids: before anything starts
  auto schedule_text = spec.pipeline.schedule == config::ScheduleKind::Custom
                           ? read_schedule_text(spec.pipeline.schedule_file)
                           : std::nullopt;
  auto program = schedule::job_program(spec, schedule_text ? &*schedule_text : nullptr);
  auto layout = schedule::job_layout(spec, program);
  // model.init_from: every tensor's presence and shape from the safetensors headers, before any spawn.
  if (!spec.model.init_from.empty()) interop::check_hf_folder(spec.model.init_from, spec.model);
  return {std::move(spec), std::move(program), std::move(layout), std::move(text), std::move(schedule_text)};
}

std::string spec_field_location(const PreparedJob& job, const std::string& field) {
  return config::field_location(job.spec_text, job.spec.source, field);
}

void use_balance_auto(PreparedJob& job) {
  job.spec.pipeline.balance = "auto";
  job.spec.pipeline.layers_per_stage.clear();
  job.layout = schedule::job_layout(job.spec, job.program);
}

schedule::GivenLayerCosts use_layer_costs(PreparedJob& job, const std::string& source, bool balance) {
  auto given = schedule::given_layer_costs(source, job.spec);
  if (balance) {
    job.layout = schedule::layout_of_split(job.spec, job.program,
                                           schedule::balance_by_times(job.spec, job.program, given.times));
    given.balanced = true;
  }
  return given;
}

std::string job_fingerprint(const PreparedJob& job) {
  const std::string all = fmt::format("{}\nprogram {:016x}\n{}", job.spec_text, schedule::program_hash(job.program),
                                      job.schedule_text.value_or(""));
  return fmt::format("spec {:016x}", core::fnv1a64(all));
}

}  // namespace ppctl::job
