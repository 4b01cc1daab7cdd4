// The rank grid's coordinates and groups (see rank_grid.hpp).
#include "plan/rank_grid.hpp"

#include <fmt/format.h>

#include "core/check.hpp"
#include "core/error.hpp"

namespace ppctl::plan {

const char* axis_name(Axis axis) {
  switch (axis) {
    case Axis::tensor: return "tp";
    case Axis::data: return "dp";
    case Axis::pipeline: return "pp";
  }
  PPCTL_ASSERT(false, "unknown axis");
  return "";
}

int64_t& RankCoords::at(Axis axis) {
  switch (axis) {
    case Axis::tensor: return tp;
    case Axis::data: return dp;
    case Axis::pipeline: return pp;
  }
  PPCTL_ASSERT(false, "unknown axis");
  return tp;
}

int64_t RankCoords::at(Axis axis) const { return const_cast<RankCoords&>(*this).at(axis); }

RankGrid::RankGrid(int64_t tp_size, int64_t dp_size, int64_t pp_size) : sizes_{tp_size, dp_size, pp_size} {
  for (Axis axis : kAxesFastestFirst) {
    if (size(axis) < 1)
      throw PlanError(fmt::format("the {} size is {}; every parallel size must be at least 1", axis_name(axis),
                                  size(axis)));
  }
}

RankCoords RankGrid::coords(int64_t rank) const {
  PPCTL_ASSERT(rank >= 0 && rank < world_size(), "rank outside the grid");
  RankCoords c;
  for (Axis axis : kAxesFastestFirst) {
    c.at(axis) = rank % size(axis);
    rank /= size(axis);
  }
  return c;
}

int64_t RankGrid::rank(RankCoords coords) const {
  int64_t rank = 0;
  for (auto it = kAxesFastestFirst.rbegin(); it != kAxesFastestFirst.rend(); ++it) {
    PPCTL_ASSERT(coords.at(*it) >= 0 && coords.at(*it) < size(*it), "coordinate outside the grid");
    rank = rank * size(*it) + coords.at(*it);
  }
  return rank;
}

std::vector<int64_t> RankGrid::group(Axis axis, int64_t rank) const {
  RankCoords c = coords(rank);
  std::vector<int64_t> members;
  for (int64_t i = 0; i < size(axis); ++i) {
    c.at(axis) = i;
    members.push_back(this->rank(c));
  }
  return members;
}

std::vector<std::vector<int64_t>> RankGrid::groups(Axis axis) const {
  std::vector<std::vector<int64_t>> all;
  for (int64_t r = 0; r < world_size(); ++r) {
    if (coords(r).at(axis) == 0) all.push_back(group(axis, r));
  }
  return all;
}

std::string RankGrid::describe() const {
  std::string sizes, formula;
  for (auto it = kAxesFastestFirst.rbegin(); it != kAxesFastestFirst.rend(); ++it) {  // slowest first
    if (size(*it) == 1) continue;
    const std::string term = fmt::format("{}_rank", axis_name(*it));
    if (formula.empty()) {
      formula = term;
    } else {
      if (formula.find(" + ") != std::string::npos) formula = "(" + formula + ")";
      formula = fmt::format("{} x {} + {}", formula, size(*it), term);
    }
    sizes = fmt::format("{} {}{}{}", axis_name(*it), size(*it), sizes.empty() ? "" : " x ", sizes);
  }
  if (sizes.empty()) return "1 rank";
  return fmt::format("{} = {} ranks; rank = {}", sizes, world_size(), formula);
}

}  // namespace ppctl::plan
