// hand_over_to_workers and handed_over_texts (see worker_handover.hpp).
#include "job/worker_handover.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "schedule/csv.hpp"

namespace ppctl::job {
namespace {

namespace fs = std::filesystem;

std::string hash_text(const std::string& text) { return fmt::format("{:016x}", core::fnv1a64(text)); }

/// The file `file_variable` names, checked against the hash `hash_variable` holds; nullopt when the first is
/// not set.
std::optional<std::string> read_handed_over(const char* file_variable, const char* hash_variable) {
  const char* path = std::getenv(file_variable);
  if (path == nullptr || *path == '\0') return std::nullopt;
  std::string text = core::read_file(path);
  const char* expected = std::getenv(hash_variable);
  if (expected != nullptr && hash_text(text) != expected) {
    throw ConfigError({fmt::format(
        "{}: this copy of what the launcher validated has changed since (hash {}, the launcher's {}) (fix: leave "
        "the run directory's files unchanged while the job runs, and start it again)",
        path, hash_text(text), expected)});
  }
  return text;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> hand_over_to_workers(const PreparedJob& job,
                                                                      const std::string& folder) {
  const fs::path dir = fs::absolute(folder).lexically_normal();
  core::write_file_atomically(dir / kSpecCopyName, job.spec_text);
  std::vector<std::pair<std::string, std::string>> env{
      {kSpecFileVariable, (dir / kSpecCopyName).string()},
      {kSpecHashVariable, hash_text(job.spec_text)},
      {kProgramHashVariable, fmt::format("{:016x}", schedule::program_hash(job.program))}};
  if (job.schedule_text) {
    core::write_file_atomically(dir / kScheduleCopyName, *job.schedule_text);
    env.emplace_back(kScheduleFileVariable, (dir / kScheduleCopyName).string());
    env.emplace_back(kScheduleHashVariable, hash_text(*job.schedule_text));
  }
  return env;
}

std::optional<JobTexts> handed_over_texts() {
  auto spec = read_handed_over(kSpecFileVariable, kSpecHashVariable);
  if (!spec) return std::nullopt;
  return JobTexts{std::move(*spec), read_handed_over(kScheduleFileVariable, kScheduleHashVariable)};
}

}  // namespace ppctl::job
