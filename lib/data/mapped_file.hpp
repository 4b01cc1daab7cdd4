// A read-only memory map of a whole file: datasets are read through it, never copied into memory.
#pragma once

#include <cstdint>
#include <string>

namespace ppctl::data {

/// A file mapped read-only with mmap(2) (MAP_SHARED, MADV_RANDOM so that a window read does not pull
/// in read-ahead). Pages are loaded on first touch and belong to the page cache: the process's own
/// (anonymous) memory does not grow with the file. Move-only; unmaps on destruction.
class MappedFile {
 public:
  /// Maps `path`. Throws ppctl::Error naming the file and the system's reason when it cannot be
  /// opened, stat'ed or mapped, or is not a regular file. An empty file maps to size 0, data null.
  explicit MappedFile(const std::string& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  /// Bytes in the file.
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// Modification time in nanoseconds since the epoch, as stat(2) saw it when mapped.
  int64_t mtime_ns() const { return mtime_ns_; }
  /// Drops the mapped pages from this process's resident set (madvise MADV_DONTNEED); the file is
  /// still mapped and reads load the pages again. Used after a one-off scan.
  void release_pages() const;
  /// Drops the pages around bytes [offset, offset + bytes) from this process's resident set, rounded
  /// out to kFaultAround: a read fault maps the neighbouring cached pages too (Linux fault-around,
  /// 64 KiB by default), so without this the resident set would grow by up to 64 KiB per window read
  /// until it held the whole (cached) file. The page cache keeps the data; only this process's page
  /// table entries go.
  void release_range(int64_t offset, int64_t bytes) const;
  static constexpr int64_t kFaultAround = 64 * 1024;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  int64_t size_ = 0;
  int64_t mtime_ns_ = 0;
};

}  // namespace ppctl::data
