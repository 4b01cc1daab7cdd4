// The job spec's data sources: data.path as globs (text) or one path (tokens, megatron) resolved against the
// spec's folder, and data.blend's weighted list of them. Internal to config/; callers use load.hpp.
#pragma once

#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "config/yaml_reader.hpp"

namespace ppctl::config::detail {

/// Reads `data.path` (one path or glob, or a list of them), resolves it and fills data.paths and data.files.
/// Each entry that matches no regular file is a problem naming the entry (`data.path[1]`); returns false then.
bool read_data_paths(Context& c, const Entry& e, std::vector<std::string>& paths, std::vector<std::string>& files_out);

/// Fills `source.files` from `e` (data.path or a blend entry's path) for the source's format: every matching
/// file for text, the one path made absolute for tokens and megatron. Reports a problem and returns false when
/// `e` cannot be read that way.
bool read_source_path(Context& c, const Entry& e, DataSource& source);

/// Reads data.blend: a non-empty list of {weight, path, format, dtype} (format and dtype default to data.format
/// and data.dtype), walked by `walk`; weights > 0, normalised to sum 1. Fills data.sources and returns true, or
/// reports every problem and returns false.
bool read_blend(Context& c, KeyWalk& walk, const Entry& e, DataSpec& data);

}  // namespace ppctl::config::detail
