// self_executable and exec_sibling (see sibling.hpp).
#include "launch/sibling.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace ppctl::launch {

std::string self_executable() {
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) throw LaunchError("cannot find the ppctl executable (/proc/self/exe)");
  return std::string(buffer, static_cast<size_t>(n));
}

std::string exec_sibling(const std::string& name, char** argv) {
  std::string self;
  try {
    self = self_executable();
  } catch (const LaunchError& e) {
    return fmt::format("{}, so {} cannot be found beside it", e.what(), name);
  }
  const std::string path = (std::filesystem::path(self).parent_path() / name).string();
  ::execv(path.c_str(), argv);
  const int err = errno;
  const char* why = err == ENOENT ? "is missing" : err == EACCES ? "is not executable" : "cannot be run";
  const std::string command = argv[0] && argv[1] ? fmt::format("`ppctl {}`", argv[1]) : std::string("ppctl");
  return fmt::format("cannot run {}: {} {} ({}); ppctl runs every command but `plan` through {}, which must "
                     "sit beside {} (fix: rebuild with scripts/build.sh, which builds both, or install ppctl and "
                     "{} into the same folder again)",
                     command, path, why, std::strerror(err), name, self, name);
}

}  // namespace ppctl::launch
