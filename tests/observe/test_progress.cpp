// Tests for observe/progress: the line's text, in-place redraws on a terminal, silence elsewhere.
#include <catch2/catch_test_macros.hpp>

#include <cstdio>
#include <string>

#include "observe/progress.hpp"

using ppctl::observe::format_progress;
using ppctl::observe::ProgressLine;

namespace {

/// Everything written to a temporary FILE*.
struct Capture {
  std::FILE* file = std::tmpfile();
  ~Capture() { std::fclose(file); }
  std::string text() const {
    std::fflush(file);
    std::rewind(file);
    std::string out;
    for (int c; (c = std::fgetc(file)) != EOF;) out.push_back(static_cast<char>(c));
    return out;
  }
};

}  // namespace

TEST_CASE("the progress text: step/total, loss, tokens/s, ETA", "[observe][progress]") {
  CHECK(format_progress(12, 20, 3.14159, 8123.4, 5.2) == "step 12/20 | loss 3.1416 | 8123 tok/s | ETA 0:05");
  CHECK(format_progress(1, 100, 1.0, 10.0, 3723.0) == "step 1/100 | loss 1.0000 | 10 tok/s | ETA 1:02:03");
  CHECK(format_progress(1, 2, 1.0, 10.0, -1.0).find("ETA ?") != std::string::npos);
}

TEST_CASE("off (not a terminal) the progress line writes nothing", "[observe][progress]") {
  Capture out;
  {
    ProgressLine line(false, out.file);
    line.update(1, 2, 1.0, 1.0, 1.0);
    line.update(2, 2, 1.0, 1.0, 0.0);
    line.finish();
  }
  CHECK(out.text().empty());
}

TEST_CASE("on a terminal each draw erases the line; the last step ends it", "[observe][progress]") {
  Capture out;
  {
    ProgressLine line(true, out.file, std::chrono::milliseconds(0));
    line.update(1, 3, 2.0, 100.0, 2.0);
    line.update(2, 3, 1.5, 100.0, 1.0);
    line.update(3, 3, 1.0, 100.0, 0.0);
  }
  const std::string erase = "\r\x1b[K";
  CHECK(out.text() == erase + format_progress(1, 3, 2.0, 100.0, 2.0) + erase +
                          format_progress(2, 3, 1.5, 100.0, 1.0) + erase +
                          format_progress(3, 3, 1.0, 100.0, 0.0) + "\n");
}

TEST_CASE("draws are throttled, and finish ends a line left open", "[observe][progress]") {
  Capture out;
  {
    ProgressLine line(true, out.file, std::chrono::hours(1));
    line.update(1, 10, 2.0, 100.0, 9.0);
    line.update(2, 10, 2.0, 100.0, 8.0);  // within the interval: not drawn
    line.finish();
    line.finish();  // nothing open any more
  }
  CHECK(out.text() == "\r\x1b[K" + format_progress(1, 10, 2.0, 100.0, 9.0) + "\n");
}
