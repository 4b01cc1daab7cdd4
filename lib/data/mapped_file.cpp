// MappedFile: open, fstat, mmap, munmap.
#include "data/mapped_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "core/echo.hpp"
#include "core/bad_input.hpp"
#include "core/error.hpp"

namespace ppctl::data {
namespace {

/// The lines of a /proc file (a count of 0 when it cannot be read).
int64_t count_lines(const char* path) {
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return 0;
  int64_t lines = 0;
  for (int c; (c = std::fgetc(f)) != EOF;) lines += c == '\n';
  std::fclose(f);
  return lines;
}

/// Why mmap(2) failed: with ENOMEM at the kernel's limit of maps per process (vm.max_map_count, 65530 by
/// default), says so, since every data file is one map and a glob over tens of thousands of files reaches it.
std::string mmap_failure(const std::string& path, int err) {
  std::string text = fmt::format("{}: cannot be memory-mapped: {}", core::echo_label(path), std::strerror(err));
  if (err != ENOMEM) return text;
  int64_t limit = 0;
  if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "re")) {
    if (std::fscanf(f, "%ld", &limit) != 1) limit = 0;
    std::fclose(f);
  }
  const int64_t maps = count_lines("/proc/self/maps");
  if (limit <= 0 || maps + 16 < limit) return text;
  return text + fmt::format(
                    ": this process already holds {} memory maps, the kernel's limit (vm.max_map_count) is {}, and "
                    "ppctl maps each data file once (fix: fewer, larger files: join small ones with cat, or make "
                    "one dataset with `ppctl data prepare`; or raise the limit on every node, e.g. sysctl -w "
                    "vm.max_map_count=262144)",
                    maps, limit);
}

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw DataError(fmt::format("{}: cannot be read: {} (fix: {})", core::echo_label(path), std::strerror(err),
                                err == ENOENT ? "check the path, relative to the spec's folder"
                                              : "make it readable by the user that runs ppctl on every node, "
                                                "e.g. chmod a+r"));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    const int err = errno;
    ::close(fd);
    throw DataError(fmt::format("{}: {}", core::echo_label(path), S_ISREG(info.st_mode) ? std::strerror(err) : "not a regular file"));
  }
  size_ = static_cast<int64_t>(info.st_size);
  mtime_ns_ = static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
  if (size_ > 0) {
    void* p = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw DataError(mmap_failure(path, err));
    }
    ::madvise(p, static_cast<size_t>(size_), MADV_RANDOM);
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file open
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mtime_ns_(other.mtime_ns_) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mtime_ns_ = other.mtime_ns_;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
}

void MappedFile::release_pages() const {
  if (data_ != nullptr) ::madvise(const_cast<uint8_t*>(data_), static_cast<size_t>(size_), MADV_DONTNEED);
}

void MappedFile::release_range(int64_t offset, int64_t bytes) const {
  if (data_ == nullptr || bytes <= 0) return;
  const int64_t begin = offset / kFaultAround * kFaultAround;
  const int64_t end = std::min(size_, (offset + bytes + kFaultAround - 1) / kFaultAround * kFaultAround);
  ::madvise(const_cast<uint8_t*>(data_) + begin, static_cast<size_t>(end - begin), MADV_DONTNEED);
}

}  // namespace ppctl::data
