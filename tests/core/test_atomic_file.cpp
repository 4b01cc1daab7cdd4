// Tests for core/atomic_file: whole-or-nothing replacement, checked reads, the checksum.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace ppctl;

TEST_CASE("write_file_atomically replaces the whole file and leaves no temporary behind") {
  const test::TempDir temp("ppctl_atomic_file_test_");
  const auto& dir = temp.path;
  const auto file = dir / "latest";
  core::write_file_atomically(file, "step-00000001\n");
  CHECK(core::read_file(file) == "step-00000001\n");
  const std::string big(1 << 20, 'x');
  core::write_file_atomically(file, big);
  CHECK(core::read_file(file) == big);
  core::write_file_atomically(file, "");
  CHECK(core::read_file(file).empty());
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++entries;
  CHECK(entries == 1);
}

TEST_CASE("failed writes and reads name the file") {
  const test::TempDir temp("ppctl_atomic_file_test_");
  const auto missing = temp.path / "no_such_folder" / "file";
  CHECK_THROWS_WITH(core::write_file_atomically(missing, "x"),
                    Catch::Matchers::ContainsSubstring(missing.string()));
  CHECK_THROWS_WITH(core::read_file(missing), Catch::Matchers::ContainsSubstring(missing.string()));
}

TEST_CASE("write_file_atomically never replaces a folder, device, FIFO or socket with a file") {
  const test::TempDir temp("ppctl_atomic_file_test_");
  const auto fifo = temp.path / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(core::write_file_atomically(fifo, "x"),
                    Catch::Matchers::ContainsSubstring(fifo.string() + ": it is a device, FIFO or socket"));
  CHECK(fs::is_fifo(fifo));
  const auto folder = temp.path / "folder";
  fs::create_directory(folder);
  CHECK_THROWS_WITH(core::write_file_atomically(folder, "x"), Catch::Matchers::ContainsSubstring("it is a folder"));
  CHECK(fs::is_directory(folder));
  // A character device (as /dev/full): refused by the same rule, and left as it is. Read-only use of /dev/null.
  CHECK_THROWS_WITH(core::write_file_atomically("/dev/null", "x"),
                    Catch::Matchers::ContainsSubstring("/dev/null: it is a device, FIFO or socket"));
  CHECK(fs::is_character_file("/dev/null"));
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(temp.path)) ++entries;
  CHECK(entries == 2);  // no temporary left
}

TEST_CASE("fnv1a64 matches the published FNV-1a test vectors and sees a one-bit change") {
  CHECK(core::fnv1a64("") == 0xcbf29ce484222325ULL);
  CHECK(core::fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(core::fnv1a64("foobar") == 0x85944171f73967e8ULL);
  CHECK(core::fnv1a64("checkpoint") != core::fnv1a64("checkpoinu"));
}
