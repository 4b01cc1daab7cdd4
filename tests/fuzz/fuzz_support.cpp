// Fuzz target support: the per-process scratch folder and file writing (see fuzz_support.hpp).
#include "fuzz_support.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ppctl::fuzz {

namespace {
struct Scratch {
  std::string path;
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ppctl_fuzz_XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("fuzz: mkdtemp");
      std::abort();
    }
    path = pattern;
  }
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};
}  // namespace

const std::string& scratch_dir() {
  static const Scratch scratch;
  return scratch.path;
}

void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::perror(("fuzz: cannot write " + path).c_str());
    std::abort();
  }
}

}  // namespace ppctl::fuzz
