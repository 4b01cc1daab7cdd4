// Reading and validating a job spec: YAML text -> JobSpec, every problem reported at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "config/job_spec.hpp"

namespace ppctl::config {

/// Values given on the command line for spec fields (`ppctl train --steps N`). Each replaces its field after
/// the spec is read and before the checks that span fields, so an override is validated exactly as the same
/// value written in the spec; problems with it name the option (`--steps 4`) as the source of the value.
struct SpecOverrides {
  std::optional<int64_t> steps;  ///< train.steps, from `--steps N`; range [1, 1e9]
};

/// Reads the YAML file at `path`, validates it fully and returns the spec with data.files resolved.
/// Throws ppctl::ConfigError listing every problem, one line each:
/// `PATH:LINE: model.heads: value 5: must divide model.hidden (128) (fix: ...)`.
/// Unknown keys get a did-you-mean; wrong types, out-of-range values and inconsistent combinations
/// (layers < stages, hidden % heads != 0, data matching no file, nccl without cuda, ...) are all errors.
/// Nothing is written and no process is started. `overrides` replace spec fields before validation.
/// The file is read by read_spec_file (so a file larger than kMaxSpecBytes is refused before parsing).
JobSpec load_job_spec(const std::string& path, const SpecOverrides& overrides = {});

/// The largest spec ppctl reads, in bytes (1 MiB). A spec is a few KiB; even a blend of hundreds of
/// datasets is tens of KiB. Past this, parsing alone grows without bound (a 5 MB YAML list took 1.2 GB and
/// 4.4 s in yaml-cpp), and every worker parses the spec again. Checked by read_spec_file (before reading more)
/// and parse_job_spec (before parsing), so `plan` and `train` refuse the same specs.
inline constexpr std::size_t kMaxSpecBytes = std::size_t{1} << 20;

/// The most data path entries a spec may hold: data.path's list, a blend entry's path list, and all of
/// data.blend's paths together. Each is one glob(3) call (1.6 million took 125 s); a corpus of more files
/// is matched by a glob (`corpus/*.txt`), not listed file by file.
inline constexpr std::size_t kMaxDataPaths = 10'000;

/// The most entries data.blend may hold (each is a dataset opened by every worker).
inline constexpr std::size_t kMaxBlendEntries = 10'000;

/// The text of the spec file at `path`, whole. Throws ppctl::ConfigError naming the path when it cannot be
/// read (missing, a folder, no permission) or holds more than kMaxSpecBytes (naming its size and the limit;
/// no more than kMaxSpecBytes + 1 bytes are read, so a pipe or /dev/zero ends too).
std::string read_spec_file(const std::string& path);

/// Same as load_job_spec on in-memory text; `source_name` appears in messages (and becomes JobSpec::source)
/// and relative data paths are resolved against `base_dir` (empty = the working directory).
/// Lines in messages are 1-based. A problem with a combination of keys is reported on the key that comes
/// later in the spec layout (pipeline.stages for layers < stages, model.heads for hidden % heads, runtime.backend
/// for nccl on cpu), at that key's line, or at the other key's line when the later one was left at its default.
JobSpec parse_job_spec(const std::string& yaml_text, const std::string& source_name,
                       const std::string& base_dir, const SpecOverrides& overrides = {});

/// The closed range [first, second] of the integer spec field `field` (a dotted path: `train.steps`), as
/// the schema reads it: for command-line options that stand for a field (`--steps`), so that their check
/// and the spec's agree. Throws std::invalid_argument when `field` is not an integer field of the schema.
std::pair<int64_t, int64_t> integer_field_range(const std::string& field);

/// `SOURCE:LINE` of the key `field` (a dotted path: `observe.runs_dir`, `data.blend[1].path`) in the spec text,
/// or `SOURCE` when the text does not write it: how a problem with a field found after loading (a folder that
/// cannot be made, a data file's contents) names where the value came from, as the loader's messages do.
/// Never throws.
std::string field_location(const std::string& yaml_text, const std::string& source_name, const std::string& field);

}  // namespace ppctl::config
