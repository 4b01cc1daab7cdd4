// Tests of launch::library_unreachable: the light ppctl's check that this user can read the LibTorch library
// before it execs ppctl-torch (issue 26 item 5). Folders this user may not search are checked here only when
// the test runs as a user other than root (root searches every folder); tests/app/cli_install.sh shared_install
// checks them as a non-root user either way.
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <filesystem>
#include <string>

#include "launch/library_access.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using ppctl::launch::library_unreachable;

TEST_CASE("a readable library, or none recorded, passes", "[launch]") {
  ppctl::test::TempDir dir;
  ppctl::test::write_checked(dir.path / "lib" / "libtorch.so", "ELF");
  CHECK_FALSE(library_unreachable((dir.path / "lib" / "libtorch.so").string(), nullptr));
  CHECK_FALSE(library_unreachable("", nullptr));
}

TEST_CASE("a library that is gone is named by its first missing folder, with the fix to make the env again",
          "[launch]") {
  ppctl::test::TempDir dir;
  const fs::path library = dir.path / "venv" / "lib" / "torch" / "lib" / "libtorch.so";
  const auto why = library_unreachable(library.string(), nullptr);
  REQUIRE(why);
  CHECK_THAT(*why, StartsWith("ppctl-torch loads LibTorch from " + library.parent_path().string() +
                              " (the virtual env this ppctl was built with), and "));
  CHECK_THAT(*why, ContainsSubstring("cannot read it: " + (dir.path / "venv").string() + " does not exist (fix: "));
  CHECK_THAT(*why, EndsWith("(fix: make the virtual env again where the build expects it (scripts/setup.sh, with the "
                            "PPCTL_VENV of the build), or build ppctl again against the env you have)"));
  // The folder exists, the file does not.
  fs::create_directories(library.parent_path());
  const auto file = library_unreachable(library.string(), nullptr);
  REQUIRE(file);
  CHECK_THAT(*file, ContainsSubstring(library.string() + " does not exist"));
}

TEST_CASE("a library the loader finds on LD_LIBRARY_PATH first passes", "[launch]") {
  ppctl::test::TempDir dir;
  const fs::path missing = dir.path / "gone" / "libtorch.so";
  ppctl::test::write_checked(dir.path / "other" / "libtorch.so", "ELF");
  const std::string with = (dir.path / "empty").string() + "::" + (dir.path / "other").string();
  CHECK_FALSE(library_unreachable(missing.string(), with.c_str()));
  const std::string without = (dir.path / "empty").string();
  CHECK(library_unreachable(missing.string(), without.c_str()));
  CHECK(library_unreachable(missing.string(), ""));
}

TEST_CASE("a folder this user may not search is named with its mode and owner", "[launch]") {
  if (::getuid() == 0) return;  // root searches every folder: see cli_install.sh shared_install
  ppctl::test::TempDir dir;
  const fs::path home = dir.path / "home";
  ppctl::test::write_checked(home / "venv" / "libtorch.so", "ELF");
  fs::permissions(home, fs::perms::owner_all);
  CHECK_FALSE(library_unreachable((home / "venv" / "libtorch.so").string(), nullptr));  // its owner may
  fs::permissions(home, fs::perms::none);
  const auto why = library_unreachable((home / "venv" / "libtorch.so").string(), nullptr);
  fs::permissions(home, fs::perms::owner_all);
  REQUIRE(why);
  CHECK_THAT(*why, ContainsSubstring(home.string() + " is not open (searchable) by it (mode 0000, owner "));
  CHECK_THAT(*why, ContainsSubstring("(fix: install the virtual env where every user can read it"));
}
