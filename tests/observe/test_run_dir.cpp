// Tests for observe/run_dir: the run directory's name, what is written into it, and bad folders.
#include <catch2/catch_test_macros.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "observe/run_dir.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using ppctl::test::TempDir;
using namespace ppctl::observe;

namespace {


std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("a run directory is named after the spec file and the UTC start time", "[observe][run_dir]") {
  CHECK(run_directory_name("configs/example.yaml", 0) == "example-19700101-000000Z");
  CHECK(run_directory_name("/a/b/job.v2.yml", 1764478512) == "job.v2-20251130-045512Z");
}

TEST_CASE("a run directory holds the exact spec text and the plan; same-second runs do not collide",
          "[observe][run_dir]") {
  TempDir tmp("ppctl_run_dir_test_");
  ppctl::config::JobSpec spec;
  spec.source = "/somewhere/job.yaml";
  spec.observe.runs_dir = (tmp.path / "runs").string();
  const std::string text = "model: {layers: 2}  # a comment kept as written\ndata: {path: x.txt}\n";
  const auto a = create_run_directory(spec, text, "the plan\n", "");
  const auto b = create_run_directory(spec, text, "the plan\n", "");
  CHECK(a.path != b.path);
  CHECK(fs::path(a.path).parent_path() == tmp.path / "runs");
  CHECK(fs::path(a.path).filename().string().rfind("job-", 0) == 0);
  CHECK(read(fs::path(a.path) / "config.yaml") == text);
  CHECK(read(fs::path(a.path) / "plan.txt") == "the plan\n");
  CHECK(fs::exists(fs::path(a.path) / "launcher.log"));
  CHECK(a.origin_us > 1'700'000'000'000'000);  // microseconds since the Unix epoch, after 2023
  CHECK(run_directory_env(a) == std::vector<std::pair<std::string, std::string>>{{kRunDirVariable, a.path}});
}

TEST_CASE("a run directory given by --run-dir is created when missing, refused when it holds files",
          "[observe][run_dir]") {
  TempDir tmp("ppctl_run_dir_test_");
  ppctl::config::JobSpec spec;
  spec.source = "job.yaml";
  const auto run = create_run_directory(spec, "x: 1\n", "", (tmp.path / "new" / "run").string());
  CHECK(run.path == (tmp.path / "new" / "run").string());
  try {
    create_run_directory(spec, "x: 1\n", "", run.path);
    FAIL("a non-empty folder was accepted");
  } catch (const ppctl::Error& e) {
    const std::string what = e.what();
    CHECK(what.find("--run-dir " + run.path) != std::string::npos);
    CHECK(what.find("not empty") != std::string::npos);
    CHECK(what.find("fix:") != std::string::npos);
  }
}

TEST_CASE("an observe.runs_dir that cannot be made is named with the spec's FILE:LINE", "[observe][run_dir]") {
  TempDir tmp("ppctl_run_dir_test_");
  std::ofstream(tmp.path / "file") << "not a folder\n";
  ppctl::config::JobSpec spec;
  spec.source = "job.yaml";
  spec.observe.runs_dir = (tmp.path / "file" / "runs").string();
  const auto refusal = [&](const std::string& spec_text) {
    try {
      create_run_directory(spec, spec_text, "", "");
    } catch (const ppctl::Error& e) {
      return std::string(e.what());
    }
    FAIL("a runs_dir under a file was accepted");
    return std::string();
  };
  const std::string text = "data: {path: x.txt}\nobserve:\n  runs_dir: " + spec.observe.runs_dir + "\n";
  CHECK(refusal(text).rfind("job.yaml:3: observe.runs_dir: value " + spec.observe.runs_dir + ": cannot create the folder", 0) == 0);
  // Not written: the default's value, at the file.
  CHECK(refusal("data: {path: x.txt}\n").rfind("job.yaml: observe.runs_dir: value " + spec.observe.runs_dir +
                                                " (default): cannot create", 0) == 0);
}
