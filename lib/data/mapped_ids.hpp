// Reading token ids out of a memory-mapped file without growing the resident set.
#pragma once

#include <cstdint>

#include "data/mapped_file.hpp"
#include "data/token_source.hpp"

namespace ppctl::data {

/// copy_ids of elements [start, start + count) of `file`, then MappedFile::release_range of the bytes
/// read, so that reading windows never grows the process's resident set.
void read_mapped_ids(const MappedFile& file, IdLayout layout, int64_t start, int64_t count, int64_t* out);

}  // namespace ppctl::data
