// Test support: a fresh folder under the system temp dir, removed with its contents at the end, and a checked
// file write. Every test uses these for its files (tests/support/check_temp_dirs.py fails on fixed names).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ppctl::test {

/// mkdtemp(3) of `<tmp>/<prefix>XXXXXX`; the folder and everything in it is removed on destruction.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "ppctl_test_") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + pattern);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

/// A fresh TempDir that lives until the test process exits, for helpers that hand out a path rather than
/// an owner (each CTest test runs in its own process: catch_discover_tests). Not thread-safe.
inline std::filesystem::path process_temp_dir(const std::string& prefix = "ppctl_test_") {
  static std::vector<std::unique_ptr<TempDir>> kept;  // destroyed (folders removed) at exit
  kept.push_back(std::make_unique<TempDir>(prefix));
  return kept.back()->path;
}

/// Writes `content` to `file` (creating its folder) and checks that every byte was written: a test must not
/// go on to read another run's file when its own write failed. Throws std::runtime_error naming the file.
inline void write_checked(const std::filesystem::path& file, const std::string& content) {
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) throw std::runtime_error("test setup: cannot write " + file.string());
}

}  // namespace ppctl::test
