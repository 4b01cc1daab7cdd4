// Test support: the fenced code blocks and the tables of the project's Markdown docs, so tests can check
// the examples and the field tables.
#pragma once

#include <fstream>
#include <string>
#include <utility>
#include <vector>

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

/// A Markdown table: the level-2 heading it stands under (`model` for `## model`), the 1-based line of its
/// header row, and its rows below the header's `|---|` line, each as its cells, trimmed.
struct MarkdownTable {
  std::string heading;
  int line = 0;
  std::vector<std::vector<std::string>> rows;
};

/// Every table of `markdown_path` whose header row is exactly `header` (e.g. `| Key | Meaning |`), in file
/// order; lines inside fenced code blocks are skipped. Empty when the file cannot be read. Cells are split
/// at every '|', so a cell must not hold one.
inline std::vector<MarkdownTable> tables_with_header(const std::string& markdown_path, const std::string& header) {
  const auto trimmed = [](const std::string& text) {
    const auto first = text.find_first_not_of(' ');
    return first == std::string::npos ? std::string() : text.substr(first, text.find_last_not_of(' ') - first + 1);
  };
  std::ifstream in(markdown_path);
  std::vector<MarkdownTable> tables;
  std::string heading;
  bool fenced = false;
  bool in_table = false;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced) continue;
    if (line.rfind("## ", 0) == 0) heading = line.substr(3);
    if (line == header) {
      tables.push_back({heading, number, {}});
      in_table = true;
      continue;
    }
    if (!in_table || line.rfind("|---", 0) == 0) continue;
    if (line.empty() || line[0] != '|') {
      in_table = false;
      continue;
    }
    std::vector<std::string> cells;
    std::size_t start = 1;
    for (std::size_t bar = line.find('|', start); bar != std::string::npos; bar = line.find('|', start)) {
      cells.push_back(trimmed(line.substr(start, bar - start)));
      start = bar + 1;
    }
    tables.back().rows.push_back(std::move(cells));
  }
  return tables;
}

}  // namespace ppctl::test
