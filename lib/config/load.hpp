// Reading and validating a job spec: YAML text -> JobSpec, every problem reported at once.
#pragma once

#include <string>

#include "config/job_spec.hpp"

namespace ppctl::config {

/// Reads the YAML file at `path`, validates it fully and returns the spec with data.files resolved.
/// Throws ppctl::ConfigError listing every problem, one line each:
/// `PATH:LINE: model.heads: value 5: must divide model.hidden (128) (fix: ...)`.
/// Unknown keys get a did-you-mean; wrong types, out-of-range values and inconsistent combinations
/// (layers < stages, hidden % heads != 0, data matching no file, nccl without cuda, ...) are all errors.
/// Nothing is written and no process is started.
JobSpec load_job_spec(const std::string& path);

/// Same as load_job_spec on in-memory text; `source_name` appears in messages (and becomes JobSpec::source)
/// and relative data paths are resolved against `base_dir` (empty = the working directory).
/// Lines in messages are 1-based. A problem with a combination of keys is reported on the key that comes
/// later in the spec layout (pipeline.stages for layers < stages, model.heads for hidden % heads, runtime.backend
/// for nccl on cpu), at that key's line, or at the other key's line when the later one was left at its default.
JobSpec parse_job_spec(const std::string& yaml_text, const std::string& source_name,
                       const std::string& base_dir);

}  // namespace ppctl::config
