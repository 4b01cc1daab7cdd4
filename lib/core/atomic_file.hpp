// Files that matter (checkpoints, their pointers): whole-or-nothing writes, checked reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ppctl::core {

/// Writes `bytes` to `path` so that `path` holds either its old content or all of the new, even if
/// the process is killed or the machine loses power mid-write: the bytes go to a temporary file in
/// the same folder (PATH.tmp.PID), which is fsync'ed, renamed over `path`, and the folder fsync'ed.
/// Throws ppctl::Error naming the file and the system's reason (the temporary file is removed), and before
/// writing anything when `path` exists as something other than a regular file or a symbolic link (a folder,
/// a device such as /dev/full, a FIFO, a socket), which the rename would replace.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

/// fsyncs a folder, so that renames and new entries in it survive a crash. Throws ppctl::Error.
void sync_directory(const std::filesystem::path& folder);

/// The whole content of `path`. Throws ppctl::Error naming the file when it cannot be read.
std::string read_file(const std::filesystem::path& path);

/// 64-bit FNV-1a hash of `bytes` (Fowler, Noll, Vo): a cheap checksum that detects truncated or
/// altered files. Not cryptographic.
uint64_t fnv1a64(std::string_view bytes);

}  // namespace ppctl::core
