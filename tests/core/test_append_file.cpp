// Tests of core/append_file (records whole or not at all on a full disk) and core/error's
// is_bad_input (which failures exit 2 and are not restarted).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <filesystem>
#include <string>

#include "core/append_file.hpp"
#include "core/atomic_file.hpp"
#include "core/bad_input.hpp"
#include "core/error.hpp"
#include "support/temp_dir.hpp"

using Catch::Matchers::ContainsSubstring;

namespace {

/// Limits the size of every file this process writes (RLIMIT_FSIZE) while it lives: a write across the
/// limit is cut short and the next one fails (EFBIG), as on a disk that fills up mid-record.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    previous_ = ::signal(SIGXFSZ, SIG_IGN);  // else the kernel's SIGXFSZ ends the process
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::signal(SIGXFSZ, previous_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  sighandler_t previous_ = SIG_DFL;
};

}  // namespace

TEST_CASE("a record that no longer fits is not written at all: the file keeps its whole records") {
  const ppctl::test::TempDir dir("ppctl_append_");
  const auto path = dir.path / "metrics.jsonl";
  const std::string record = std::string(29, 'x') + "\n";  // 30 bytes: 3 fit under 100, the 4th is cut
  std::string message;
  int written = 0;
  {
    auto file = ppctl::core::AppendOnlyFile::create(path, "the metrics file");
    const FileSizeLimit limit(100);
    try {
      for (; written < 10; ++written) file.append(record);
    } catch (const ppctl::Error& e) {
      message = e.what();
    }
  }
  CHECK(written == 3);
  CHECK(ppctl::core::read_file(path) == record + record + record);
  CHECK_THAT(message, ContainsSubstring("cannot write the metrics file " + path.string() + ": File too large"));
  CHECK_THAT(message, ContainsSubstring("the record was not written; the file keeps its whole records"));
  CHECK_THAT(message, ContainsSubstring("fix: free space on the file system holding " + dir.path.string()));
}

TEST_CASE("a full device is reported with the system's words and the fix") {
  auto file = ppctl::core::AppendOnlyFile::create("/dev/full", "the metrics file");
  try {
    file.append("{\"step\": 1}\n");
    FAIL("the write to /dev/full succeeded");
  } catch (const ppctl::Error& e) {
    CHECK_THAT(std::string(e.what()), ContainsSubstring("cannot write the metrics file /dev/full: No space left on device"));
    CHECK_THAT(std::string(e.what()), ContainsSubstring("fix: free space"));
  }
}

TEST_CASE("bad input is every error about the user's spec, files or addresses, and nothing else") {
  CHECK(ppctl::is_bad_input(ppctl::ConfigError({"job.yaml:1: x: unknown key"})));
  CHECK(ppctl::is_bad_input(ppctl::PlanError("more stages than layers")));
  CHECK(ppctl::is_bad_input(ppctl::ScheduleError("deadlock")));
  CHECK(ppctl::is_bad_input(ppctl::CheckpointError("truncated")));
  CHECK(ppctl::is_bad_input(ppctl::DataError("cannot be read")));
  CHECK(ppctl::is_bad_input(ppctl::AddressError("MASTER_ADDR does not resolve")));
  CHECK_FALSE(ppctl::is_bad_input(ppctl::CommError("connection closed by peer")));
  CHECK_FALSE(ppctl::is_bad_input(ppctl::CommTimeout("timed out")));
  CHECK_FALSE(ppctl::is_bad_input(ppctl::LaunchError("fork failed")));
  CHECK_FALSE(ppctl::is_bad_input(ppctl::Error("No space left on device")));
  CHECK_FALSE(ppctl::is_bad_input(std::runtime_error("other")));
}
