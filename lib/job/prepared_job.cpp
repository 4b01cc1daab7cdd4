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
#include "job/worker.hpp"
#include "schedule/csv.hpp"
#include "schedule/job_program.hpp"
#include "schedule/split_time.hpp"

namespace ppctl::job {
namespace {

/// A file's text, or nothing when it is a folder or cannot be opened.
std::optional<std::string> read_text(const std::string& path) {
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
  const auto text = read_text(spec_path);
  // An unreadable path (missing, a folder, no permission) gets the loader's own message naming it.
  auto spec = text ? config::parse_job_spec(*text, spec_path,
                                            std::filesystem::absolute(spec_path).parent_path().string(), overrides)
                   : config::load_job_spec(spec_path, overrides);
  data::check_data(spec, text.value_or(""));  // files, index, windows, token ids: before anything starts
  // A custom schedule that cannot be read is reported by job_program reading the file itself.
  const auto schedule_text = spec.pipeline.schedule == config::ScheduleKind::Custom
                                 ? read_text(spec.pipeline.schedule_file)
                                 : std::nullopt;
  auto program = schedule::job_program(spec, schedule_text ? &*schedule_text : nullptr);
  auto layout = schedule::job_layout(spec, program);
  // model.init_from: every tensor's presence and shape from the safetensors headers, before any spawn.
  if (!spec.model.init_from.empty()) interop::check_hf_folder(spec.model.init_from, spec.model);
  std::vector<std::pair<std::string, std::string>> env{
      {kSpecTextVariable, text.value_or("")},
      {kProgramHashVariable, fmt::format("{:016x}", schedule::program_hash(program))}};
  if (schedule_text) env.emplace_back(kScheduleTextVariable, *schedule_text);
  return {std::move(spec), std::move(program), std::move(layout), std::move(env)};
}

std::string spec_field_location(const PreparedJob& job, const std::string& field) {
  for (const auto& [name, value] : job.worker_env) {
    if (name == kSpecTextVariable) return config::field_location(value, job.spec.source, field);
  }
  return job.spec.source;
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
  std::string all;
  for (const auto& [name, value] : job.worker_env) all += name + "=" + value + '\n';
  return fmt::format("spec {:016x}", core::fnv1a64(all));
}

}  // namespace ppctl::job
