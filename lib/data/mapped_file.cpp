// MappedFile: open, fstat, mmap, munmap.
#include "data/mapped_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/echo.hpp"
#include "core/bad_input.hpp"
#include "core/error.hpp"

namespace ppctl::data {

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
      throw DataError(fmt::format("{}: cannot be memory-mapped: {}", core::echo_label(path), std::strerror(err)));
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
