// What the launcher hands its workers: the spec and custom schedule texts it validated, as files (in the run
// directory, or verify's temporary folder) named in the workers' environment with their hashes, so that a
// worker runs exactly what was planned however large the spec (an environment variable is capped at 128 KiB).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "job/prepared_job.hpp"

namespace ppctl::job {

/// The variables the local launcher sets for its workers (hand_over_to_workers): the absolute path of the
/// copy of the validated spec, and its FNV-1a 64 hash (core::fnv1a64) in hex ...
inline constexpr const char* kSpecFileVariable = "PPCTL_SPEC_FILE";
inline constexpr const char* kSpecHashVariable = "PPCTL_SPEC_HASH";
/// ... the same for a custom schedule's CSV text (set only for pipeline.schedule: custom) ...
inline constexpr const char* kScheduleFileVariable = "PPCTL_SCHEDULE_FILE";
inline constexpr const char* kScheduleHashVariable = "PPCTL_SCHEDULE_HASH";
/// ... and the hash of the program it planned (schedule::program_hash), in hex.
inline constexpr const char* kProgramHashVariable = "PPCTL_PROGRAM_HASH";

/// The file names of the copies in the folder given to hand_over_to_workers.
inline constexpr const char* kSpecCopyName = "config.yaml";
inline constexpr const char* kScheduleCopyName = "schedule.csv";

/// The texts a worker runs: the spec as validated, and a custom schedule's CSV text.
struct JobTexts {
  std::string spec;
  std::optional<std::string> schedule;
};

/// The launcher's side: writes job.spec_text to FOLDER/config.yaml and a custom schedule's text to
/// FOLDER/schedule.csv (atomically: core::write_file_atomically; the run directory's config.yaml already
/// holds the same text) and returns the variables above for the workers' environment (`folder` made
/// absolute). Throws ppctl::Error naming a file that cannot be written.
std::vector<std::pair<std::string, std::string>> hand_over_to_workers(const PreparedJob& job,
                                                                      const std::string& folder);

/// The worker's side: the texts named by kSpecFileVariable and kScheduleFileVariable in this process's
/// environment, each checked against its hash; nullopt when no spec file is named (a worker started by
/// torchrun, srun or by hand reads the spec itself). Throws ppctl::Error naming the file when it cannot be
/// read, ppctl::ConfigError (bad input: not restarted) when it differs from what the launcher validated (edited
/// after launch).
std::optional<JobTexts> handed_over_texts();

}  // namespace ppctl::job
