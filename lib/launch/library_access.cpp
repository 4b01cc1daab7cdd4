// library_unreachable (see library_access.hpp).
#include "launch/library_access.hpp"

#include <fmt/format.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace ppctl::launch {
namespace {

namespace fs = std::filesystem;

/// `user NAME (uid N)` for the real uid, or `uid N` when it has no name.
std::string user_text() {
  const uid_t uid = ::getuid();
  if (const passwd* entry = ::getpwuid(uid)) return fmt::format("user {} (uid {})", entry->pw_name, uid);
  return fmt::format("uid {}", uid);
}

/// `mode 0700, owner root` of `path`, or "" when it cannot be stat'ed.
std::string mode_text(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return "";
  const passwd* owner = ::getpwuid(info.st_uid);
  return fmt::format(" (mode {:04o}, owner {})", info.st_mode & 07777,
                     owner ? std::string(owner->pw_name) : std::to_string(info.st_uid));
}

/// Whether some folder of the colon-separated `ld_library_path` holds a readable file named `name`.
bool on_library_path(const char* ld_library_path, const std::string& name) {
  if (ld_library_path == nullptr) return false;
  std::stringstream folders(ld_library_path);
  for (std::string folder; std::getline(folders, folder, ':');) {
    if (!folder.empty() && ::access((fs::path(folder) / name).c_str(), R_OK) == 0) return true;
  }
  return false;
}

/// Why `path` (a folder on the way to the library when `folder`, else the library file) fails `mode`, after
/// access(2) set errno to `error`.
std::string cause(const fs::path& path, bool folder, int error) {
  if (error == ENOENT || error == ENOTDIR) return fmt::format("{} does not exist", path.string());
  if (error == EACCES) {
    return fmt::format("{} is not {} by it{}", path.string(), folder ? "open (searchable)" : "readable",
                       mode_text(path));
  }
  return fmt::format("{}: {}", path.string(), std::strerror(error));
}

}  // namespace

std::optional<std::string> library_unreachable(const std::string& library, const char* ld_library_path) {
  if (library.empty()) return std::nullopt;
  const fs::path file(library);
  std::optional<std::string> why;
  bool missing = false;
  fs::path prefix;
  for (const auto& part : file.parent_path()) {
    prefix /= part;
    if (::access(prefix.c_str(), X_OK) != 0) {
      missing = errno == ENOENT || errno == ENOTDIR;
      why = cause(prefix, true, errno);
      break;
    }
  }
  if (!why && ::access(file.c_str(), R_OK) != 0) {
    missing = errno == ENOENT || errno == ENOTDIR;
    why = cause(file, false, errno);
  }
  if (!why || on_library_path(ld_library_path, file.filename().string())) return std::nullopt;
  const std::string fix =
      missing ? "make the virtual env again where the build expects it (scripts/setup.sh, with the PPCTL_VENV of "
                "the build), or build ppctl again against the env you have"
              : "install the virtual env where every user can read it and build against it: "
                "`PPCTL_VENV=/opt/ppctl/venv scripts/setup.sh`, then scripts/build.sh with a new PPCTL_BUILD_DIR "
                "(docs/launching.md, \"Installs shared by several users\"); or build ppctl as this user";
  return fmt::format("ppctl-torch loads LibTorch from {} (the virtual env this ppctl was built with), and {} cannot "
                     "read it: {} (fix: {})",
                     file.parent_path().string(), user_text(), *why, fix);
}

}  // namespace ppctl::launch
