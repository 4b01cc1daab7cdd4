// Tests of core/log: a log file that cannot be written (a full disk) is reported once, in ppctl's
// words, instead of spdlog's "[*** LOG ERROR ***]" line per failed write.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <catch2/catch_test_macros.hpp>
#include <string>

#include "core/atomic_file.hpp"
#include "core/log.hpp"
#include "support/temp_dir.hpp"

TEST_CASE("a log file on a full device is reported once, as one ppctl warning") {
  const ppctl::test::TempDir dir("ppctl_log_");
  const auto captured = dir.path / "stderr";
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  const int fd = ::open(captured.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);
  ppctl::core::setup_logging(3);
  ppctl::core::add_log_file("/dev/full");
  for (int i = 0; i < 5; ++i) spdlog::info("line {}", i);
  spdlog::default_logger()->flush();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ppctl::core::setup_logging(std::nullopt);  // the later tests' logger: stderr only
  const std::string text = ppctl::core::read_file(captured);
  CHECK(text.find("LOG ERROR") == std::string::npos);
  const std::string warning = "[rank 3] warning: cannot write to a log file: ";
  const auto first = text.find(warning);
  REQUIRE(first != std::string::npos);
  CHECK(text.find("No space left on device", first) != std::string::npos);
  CHECK(text.find("cannot write to a log file", first + warning.size()) == std::string::npos);
  CHECK(text.find("line 4") != std::string::npos);  // the lines still reach stderr
}
