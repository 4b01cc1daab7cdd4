// Tests for data/mapped_file: a file mapped past the kernel's limit of maps per process is refused with the
// limit named and a fix (a glob over tens of thousands of files reached it with a bare "Cannot allocate memory").
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/bad_input.hpp"
#include "data/mapped_file.hpp"
#include "support/temp_dir.hpp"

using ppctl::data::MappedFile;

TEST_CASE("mapping more files than vm.max_map_count allows names the limit and the fix") {
  int64_t limit = 0;
  std::ifstream("/proc/sys/vm/max_map_count") >> limit;
  if (limit <= 0 || limit > 200'000) SKIP("vm.max_map_count is " << limit << ": too many maps to reach in a test");
  const auto dir = ppctl::test::process_temp_dir("ppctl_mapped_file_");
  const auto path = (dir / "one.txt").string();
  ppctl::test::write_checked(path, "a few bytes of text\n");
  // One file mapped again and again stands in for a glob over many files: each mapping is one map (the kernel
  // merges none of them, all at file offset 0).
  std::vector<MappedFile> maps;
  std::string message;
  for (int64_t i = 0; i <= limit && message.empty(); ++i) {
    try {
      maps.emplace_back(path);
    } catch (const ppctl::DataError& e) {
      message = e.what();
    }
  }
  maps.clear();  // give the maps back before anything else runs
  REQUIRE_FALSE(message.empty());
  INFO(message);
  CHECK(message.find(path + ": cannot be memory-mapped: Cannot allocate memory: this process already holds ") == 0);
  CHECK(message.find("the kernel's limit (vm.max_map_count) is ") != std::string::npos);
  CHECK(message.find("fix: fewer, larger files") != std::string::npos);
}
