// Test support: the fenced code blocks of the project's Markdown docs, so tests can check the
// examples.
#pragma once

#include <fstream>
#include <string>

namespace ppctl::test {

/// The text of the first ```<language> block of `markdown_path` (lines between the fences, each
/// ending in '\n'); empty when the file cannot be read or holds no such block.
inline std::string first_code_block(const std::string& markdown_path, const std::string& language) {
  std::ifstream in(markdown_path);
  std::string line;
  std::string block;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line == "```" + language) {
      inside = true;
    } else if (inside && line == "```") {
      break;
    } else if (inside) {
      block += line + "\n";
    }
  }
  return block;
}

}  // namespace ppctl::test
