// Test support: a fresh folder under the system temp dir, removed with its contents at the end.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

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

}  // namespace ppctl::test
