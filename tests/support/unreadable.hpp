// Test support: a file this process cannot read for a while, also when the tests run as root.
#pragma once

#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace ppctl::test {

/// While alive: `path` has mode 000 and the calling thread's effective capabilities lack CAP_DAC_OVERRIDE
/// and CAP_DAC_READ_SEARCH (with them root reads any file; capset(2) on the thread, restored at the end),
/// so an open(2) for reading fails with EACCES as it does for an ordinary user. The mode is restored too.
class Unreadable {
 public:
  explicit Unreadable(std::filesystem::path path) : path_(std::move(path)) {
    struct stat info {};
    if (::stat(path_.c_str(), &info) != 0) throw std::runtime_error("test setup: no file " + path_.string());
    mode_ = info.st_mode & 07777;
    if (::chmod(path_.c_str(), 0) != 0) throw std::runtime_error("test setup: cannot chmod " + path_.string());
    if (::syscall(SYS_capget, &header_, saved_) != 0) throw std::runtime_error("test setup: capget failed");
    __user_cap_data_struct lowered[2] = {saved_[0], saved_[1]};
    lowered[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    if (::syscall(SYS_capset, &header_, lowered) != 0) throw std::runtime_error("test setup: capset failed");
  }
  ~Unreadable() {
    ::syscall(SYS_capset, &header_, saved_);
    ::chmod(path_.c_str(), mode_);
  }
  Unreadable(const Unreadable&) = delete;
  Unreadable& operator=(const Unreadable&) = delete;

 private:
  std::filesystem::path path_;
  mode_t mode_ = 0644;
  __user_cap_header_struct header_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct saved_[2] = {};
};

}  // namespace ppctl::test
