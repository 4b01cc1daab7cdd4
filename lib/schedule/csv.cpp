// Custom schedules as CSV (one row per rank, one compute action per cell), and the program hash.
#include "schedule/csv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "core/error.hpp"

namespace ppctl::schedule {
namespace {

std::string_view trimmed(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

/// Where a cell sits, for messages: `FILE: line 3, row 2 (rank 1), column 4`.
struct Cell {
  size_t line = 0;    ///< 1-based line of the file
  int64_t rank = 0;   ///< 0-based row among the rows that hold actions (= rank)
  size_t column = 0;  ///< 1-based cell index in the line

  std::string where(const std::string& source) const {
    return fmt::format("{}: line {}, row {} (rank {}), column {}", source, line, rank + 1, rank,
                       column);
  }
};

/// The smallest index in [0, count) that `seen` lacks (seen holds only indices in range).
int64_t first_gap(const std::set<int64_t>& seen) {
  int64_t expected = 0;
  for (int64_t index : seen) {
    if (index != expected) break;
    ++expected;
  }
  return expected;
}

}  // namespace

/// The format of torch.distributed.pipelining's _PipelineSchedule CSV (one row per rank, actions in
/// text form), restricted to compute actions: ppctl adds the communication (add_communication).
Program parse_csv(const std::string& text, const std::string& source) {
  Program program;
  std::map<int64_t, Cell> stage_owner;
  std::set<int64_t> microbatches;
  // Editors on Windows often start files with a UTF-8 byte order mark; it is not part of the schedule.
  constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
  std::istringstream lines(text.compare(0, kUtf8Bom.size(), kUtf8Bom) == 0
                               ? text.substr(kUtf8Bom.size())
                               : text);
  std::string line;
  Cell cell;
  while (std::getline(lines, line)) {
    ++cell.line;
    const std::string_view row = trimmed(line);
    if (row.empty() || row.front() == '#') continue;
    cell.rank = program.num_ranks();
    RankProgram& actions = program.ranks.emplace_back();
    cell.column = 0;
    for (size_t start = 0; start <= row.size();) {
      const size_t comma = std::min(row.find(',', start), row.size());
      const std::string_view text_cell = trimmed(row.substr(start, comma - start));
      start = comma + 1;
      ++cell.column;
      if (text_cell.empty()) continue;
      Action action;
      try {
        action = parse_action(text_cell);
      } catch (const ScheduleError& e) {
        throw ScheduleError(fmt::format(
            "{}: {} (a schedule file holds compute actions only: <stage><F|B|I|W><microbatch>, e.g. "
            "1F3 or 0W2)",
            cell.where(source), e.what()));
      }
      if (!is_compute(action.kind))
        throw ScheduleError(fmt::format(
            "{}: {} is a {}; a schedule file lists compute actions only (F, B, I, W) and ppctl adds "
            "the transfers and, with runtime.overlap_grad_reduce, the gradient reductions (fix: "
            "delete the cell)",
            cell.where(source), text_cell,
            is_reduce(action.kind) ? "gradient reduction action" : "communication action"));
      const auto [owner, fresh] = stage_owner.emplace(action.stage, cell);
      if (!fresh && owner->second.rank != cell.rank)
        throw ScheduleError(
            fmt::format("{}: {} puts stage {} on rank {}, but {} already put it on rank {}; a "
                        "stage runs on one rank (fix: move the action to row {})",
                        cell.where(source), text_cell, action.stage, cell.rank,
                        owner->second.where(source), owner->second.rank, owner->second.rank + 1));
      microbatches.insert(action.microbatch);
      actions.push_back(action);
    }
    if (actions.empty())
      throw ScheduleError(fmt::format(
          "{}: line {}, row {} (rank {}) has no action; every rank runs at least one stage (fix: "
          "fill the row, or delete it and renumber the stages)",
          source, cell.line, cell.rank + 1, cell.rank));
  }
  if (program.ranks.empty())
    throw ScheduleError(fmt::format(
        "{}: the schedule is empty (fix: write one row per rank, e.g. `0F0,0F1,0B0,0B1`)", source));
  program.num_stages = stage_owner.rbegin()->first + 1;
  program.num_microbatches = *microbatches.rbegin() + 1;
  std::set<int64_t> stages;
  for (const auto& entry : stage_owner) stages.insert(entry.first);
  if (const int64_t gap = first_gap(stages); gap < program.num_stages)
    throw ScheduleError(fmt::format(
        "{}: stage {} has no action, but stage {} does; stages are numbered from 0 without gaps "
        "(fix: add stage {}'s actions, or renumber the stages)",
        source, gap, program.num_stages - 1, gap));
  if (const int64_t gap = first_gap(microbatches); gap < program.num_microbatches)
    throw ScheduleError(fmt::format(
        "{}: microbatch {} has no action, but microbatch {} does; microbatches are numbered from 0 "
        "without gaps (fix: add microbatch {}'s actions, or renumber the microbatches)",
        source, gap, program.num_microbatches - 1, gap));
  for (const auto& entry : stage_owner) program.stage_to_rank.push_back(entry.second.rank);
  return program;
}

Program read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ScheduleError(
        fmt::format("{}: cannot read the schedule file: {} (fix: check the path and "
                    "its permissions)",
                    path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_csv(text.str(), path);
}

std::string to_csv(const Program& program) {
  std::string out;
  for (const RankProgram& actions : program.ranks) {
    std::string row;
    for (const Action& action : actions) {
      if (!is_compute(action.kind)) continue;
      if (!row.empty()) row += ',';
      row += to_string(action);
    }
    out += row + '\n';
  }
  return out;
}

/// FNV-1a (Fowler, Noll, Vo; 64-bit offset basis and prime from the reference at isthe.com/chongo/
/// tech/comp/fnv) over a canonical text: a version line, the geometry, the placement and each
/// rank's actions in text form. Text, not memory, so it is the same on every machine and compiler.
uint64_t program_hash(const Program& program) {
  std::string text = fmt::format("ppctl program v1\nstages {}\nmicrobatches {}\nstage_to_rank",
                                 program.num_stages, program.num_microbatches);
  for (int64_t rank : program.stage_to_rank) text += fmt::format(" {}", rank);
  for (size_t r = 0; r < program.ranks.size(); ++r) {
    text += fmt::format("\nrank {}:", r);
    for (const Action& action : program.ranks[r]) text += ' ' + to_string(action);
  }
  uint64_t hash = 14695981039346656037ULL;
  for (unsigned char byte : text) {
    hash ^= byte;
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace ppctl::schedule
