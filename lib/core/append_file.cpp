// Append-only files of whole records: one write per record, cut back on failure.
#include "core/append_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.hpp"

namespace ppctl::core {

AppendOnlyFile::AppendOnlyFile(std::filesystem::path path, int fd, std::string what)
    : path_(std::move(path)), fd_(fd), what_(std::move(what)) {
  struct stat info {};
  if (::fstat(fd_, &info) == 0) length_ = static_cast<long long>(info.st_size);
}

AppendOnlyFile AppendOnlyFile::create(std::filesystem::path path, std::string what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot write {} {}: {}", what, path.string(), std::strerror(errno)));
  return AppendOnlyFile(std::move(path), fd, std::move(what));
}

AppendOnlyFile::~AppendOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

AppendOnlyFile::AppendOnlyFile(AppendOnlyFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), what_(std::move(other.what_)),
      length_(other.length_) {}

AppendOnlyFile& AppendOnlyFile::operator=(AppendOnlyFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    what_ = std::move(other.what_);
    length_ = other.length_;
  }
  return *this;
}

void AppendOnlyFile::append(std::string_view record) {
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    const int err = n < 0 ? errno : ENOSPC;  // a write of 0 bytes: nothing more fits
    const bool cut = ::ftruncate(fd_, static_cast<off_t>(length_)) == 0;
    const bool no_space = err == ENOSPC || err == EDQUOT || err == EFBIG;
    throw Error(fmt::format(
        "cannot write {} {}: {} ({}) (fix: {})", what_, path_.string(), std::strerror(err),
        cut ? "the record was not written; the file keeps its whole records"
            : "and it could not be cut back to its last whole record",
        no_space ? fmt::format("free space on the file system holding {}, or put the run directory "
                               "elsewhere with --run-dir or observe.runs_dir",
                               path_.parent_path().string())
                 : "check the folder's permissions and the disk"));
  }
  length_ += static_cast<long long>(record.size());
}

}  // namespace ppctl::core
