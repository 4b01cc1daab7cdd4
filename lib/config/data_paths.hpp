// The job spec's data sources: data.path as globs (text) or one path (tokens, megatron) resolved against the
// spec's folder. Internal to config/; callers use load.hpp.
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

}  // namespace ppctl::config::detail
