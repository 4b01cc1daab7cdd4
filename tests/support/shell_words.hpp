// How bash splits a command line that ppctl prints for the user to paste: each word it passes on, in order.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace ppctl::test {

/// The words bash makes of `command_line` (quotes removed, nothing expanded but what bash would expand), each
/// NUL-terminated by `printf '%s\0'`. Runs bash through popen; the line is written to a file and sourced, so
/// it reaches bash byte for byte.
inline std::vector<std::string> shell_words(const std::string& command_line) {
  const TempDir dir("ppctl_shell_words_");
  const auto script = dir.path / "line.sh";
  write_checked(script, "words() { printf '%s\\0' \"$@\"; }\nwords " + command_line + "\n");
  std::vector<std::string> words;
  FILE* pipe = popen(("bash " + script.string()).c_str(), "r");
  if (pipe == nullptr) return words;
  std::string current;
  for (int c; (c = std::fgetc(pipe)) != EOF;) {
    if (c == '\0') {
      words.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(c);
    }
  }
  pclose(pipe);
  return words;
}

}  // namespace ppctl::test
