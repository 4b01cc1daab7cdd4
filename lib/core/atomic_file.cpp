// Atomic file replacement (temporary file, fsync, rename, fsync of the folder) and checked reads.
#include "core/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace ppctl::core {
namespace {

/// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path, int error) {
  throw Error(fmt::format("cannot {} {}: {} (fix: check the disk space and the folder's permissions)",
                          what, path.string(), std::strerror(error)));
}

}  // namespace

void sync_directory(const std::filesystem::path& folder) {
  Fd dir{::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (dir.fd < 0) fail("open the folder", folder, errno);
  if (::fsync(dir.fd) != 0) fail("sync the folder", folder, errno);
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  // The rename would replace whatever `path` is: a device such as /dev/full, a FIFO or a socket would be lost
  // (as root, for every process of the machine). Only a regular file, or a link, is replaced.
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status) &&
      !std::filesystem::is_symlink(status)) {
    const char* kind = std::filesystem::is_directory(status) ? "a folder" : "a device, FIFO or socket";
    throw Error(fmt::format("cannot write {}: it is {}, not a regular file, and writing would replace it (fix: "
                            "name a regular file)",
                            path.string(), kind));
  }
  const auto tmp = std::filesystem::path(path.string() + fmt::format(".tmp.{}", ::getpid()));
  {
    Fd file{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    if (file.fd < 0) fail("create", tmp, errno);
    const char* data = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
      const ssize_t n = ::write(file.fd, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int error = errno;
        ::unlink(tmp.c_str());
        fail("write", tmp, error);
      }
      data += n;
      left -= static_cast<size_t>(n);
    }
    if (::fsync(file.fd) != 0) {
      const int error = errno;
      ::unlink(tmp.c_str());
      fail("sync", tmp, error);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    fail("rename the finished file onto", path, error);
  }
  sync_directory(path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path());
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("read", path, errno);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("read", path, errno);
  return text.str();
}

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace ppctl::core
