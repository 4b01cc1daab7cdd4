// Data-parallel size, rank mapping and process groups (see parallel.hpp).
#include "plan/parallel.hpp"

#include <fmt/format.h>

#include <set>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/rank_list.hpp"

namespace ppctl::plan {

int64_t resolve_data_parallel(const config::JobSpec& spec, std::optional<int64_t> world_size,
                              const std::string& world_name) {
  const int64_t p = spec.pipeline.stages;
  const int64_t t = spec.pipeline.tensor_parallel;
  const int64_t dp = spec.pipeline.data_parallel;
  const std::string source = spec.source.empty() ? "job spec" : spec.source;
  if (!world_size) return dp == 0 ? 1 : dp;
  // "pipeline.stages = 4" alone, or "pipeline.tensor_parallel x pipeline.stages = 2 x 4 = 8" with t > 1
  const int64_t replica = t * p;
  const std::string replica_named =
      t == 1 ? fmt::format("pipeline.stages = {}", p)
             : fmt::format("pipeline.tensor_parallel x pipeline.stages = {} x {} = {}", t, p, replica);
  if (dp == 0) {
    if (*world_size % replica != 0) {
      throw PlanError(fmt::format(
          "{}: {}={} is not a multiple of {}: every data-parallel replica needs {} ranks (fix: start a "
          "multiple of {} workers, or change pipeline.stages{})",
          source, world_name, *world_size, replica_named, replica, replica, t == 1 ? "" : " or pipeline.tensor_parallel"));
    }
    return *world_size / replica;
  }
  if (dp * replica != *world_size) {
    const std::string product =
        t == 1 ? fmt::format("pipeline.data_parallel x pipeline.stages = {} x {}", dp, p)
               : fmt::format("pipeline.tensor_parallel x pipeline.data_parallel x pipeline.stages = {} x {} x {}", t,
                             dp, p);
    throw PlanError(fmt::format(
        "{}: {}={} but {} = {} (fix: start exactly {} workers, or set pipeline.data_parallel to 0 to "
        "derive it from {})",
        source, world_name, *world_size, product, dp * replica, dp * replica, world_name));
  }
  return dp;
}

void check_tensor_parallel_per_node(const config::JobSpec& spec, const std::vector<int>& ranks_per_node,
                                    const std::string& source) {
  const int64_t t = spec.pipeline.tensor_parallel;
  std::set<int> off;  // the node counts t does not divide
  for (const int n : ranks_per_node) {
    if (n % t != 0) off.insert(n);
  }
  if (off.empty()) return;
  const std::string where = spec.source.empty() ? "job spec" : spec.source;
  const int worst = *off.begin();
  throw PlanError(fmt::format(
      "{}: pipeline.tensor_parallel = {} but {} puts {} worker{} on a node: a tensor-parallel group of {} adjacent "
      "ranks must sit on one node, so every node's count must be a multiple of {} (fix: start a multiple of {} "
      "workers on every node, e.g. one per GPU, or set pipeline.tensor_parallel to a divisor of {})",
      where, t, source, worst, worst == 1 ? "" : "s", t, t, t, worst));
}

std::string replica0_rank_name(int64_t pp, const RankGrid& grid) {
  if (grid.world_size() == grid.size(Axis::pipeline)) return fmt::format("rank {}", pp);
  return fmt::format("rank {} (pipeline rank {} of replica 0)", grid.rank({0, 0, pp}), pp);
}

namespace {

/// "a, b, ..., z" of `items`: all of them up to 4, else the first two and the last.
std::string first_two_and_last(const std::vector<std::string>& items) {
  if (items.size() <= 4) return fmt::format("{}", fmt::join(items, ", "));
  return fmt::format("{}, {}, ..., {}", items[0], items[1], items.back());
}

}  // namespace

std::string format_rank_mapping(const RankGrid& grid) {
  std::string out = grid.describe() + "\n";
  const int64_t tp = grid.size(Axis::tensor), pp = grid.size(Axis::pipeline);
  if (tp == 1) {
    for (const auto& pipeline : grid.groups(Axis::pipeline)) {
      out += fmt::format("           replica {}: ranks {} (pp rank 0..{})\n", grid.coords(pipeline.front()).dp,
                         core::format_rank_list(pipeline), pp - 1);
    }
    return out;
  }
  // With tp, a pipeline rank of a replica is a tp group of adjacent ranks: one line per replica.
  std::vector<std::string> groups;
  for (const auto& group : grid.groups(Axis::tensor)) groups.push_back(fmt::format("{}-{}", group.front(), group.back()));
  out += fmt::format("           tp groups: {} of {} adjacent ranks, {} (each on one node)\n", groups.size(), tp,
                     first_two_and_last(groups));
  for (int64_t dp = 0; dp < grid.size(Axis::data); ++dp) {
    std::vector<std::string> stages;
    for (int64_t k = 0; k < pp; ++k) {
      const int64_t first = grid.rank({0, dp, k});
      stages.push_back(fmt::format("{}-{}", first, first + tp - 1));
    }
    out += fmt::format("           replica {}: tp groups {} (pp rank 0..{})\n", dp, first_two_and_last(stages), pp - 1);
  }
  return out;
}

}  // namespace ppctl::plan
