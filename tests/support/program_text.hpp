// Test support: a schedule Program written by hand as per-rank action text (`0F0 0SEND_F0 ...`), for
// the schedule tests that check hand-computed timelines and hand-broken programs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "schedule/action.hpp"

namespace ppctl::test {

/// A program of `microbatches` microbatches whose rank r runs parse_rank(ranks[r]); stage s runs on
/// rank stage_to_rank[s] (num_stages = its size). Throws ppctl::ScheduleError on malformed text.
inline schedule::Program hand_made(int64_t microbatches, std::vector<int64_t> stage_to_rank,
                                   const std::vector<std::string>& ranks) {
  schedule::Program program;
  program.num_stages = static_cast<int64_t>(stage_to_rank.size());
  program.num_microbatches = microbatches;
  program.stage_to_rank = std::move(stage_to_rank);
  for (const std::string& text : ranks) program.ranks.push_back(schedule::parse_rank(text));
  return program;
}

}  // namespace ppctl::test
