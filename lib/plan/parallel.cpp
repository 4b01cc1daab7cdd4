// Data-parallel size, rank mapping and process groups (see parallel.hpp).
#include "plan/parallel.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/rank_list.hpp"

namespace ppctl::plan {

int64_t resolve_data_parallel(const config::JobSpec& spec, std::optional<int64_t> world_size) {
  const int64_t p = spec.pipeline.stages;
  const int64_t dp = spec.pipeline.data_parallel;
  const std::string source = spec.source.empty() ? "job spec" : spec.source;
  if (!world_size) return dp == 0 ? 1 : dp;
  if (dp == 0) {
    if (*world_size % p != 0) {
      throw PlanError(fmt::format(
          "{}: WORLD_SIZE={} is not a multiple of pipeline.stages = {}: every data-parallel replica "
          "needs {} ranks (fix: start a multiple of {} workers, or change pipeline.stages)",
          source, *world_size, p, p, p));
    }
    return *world_size / p;
  }
  if (dp * p != *world_size) {
    throw PlanError(fmt::format(
        "{}: WORLD_SIZE={} but pipeline.data_parallel x pipeline.stages = {} x {} = {} (fix: start "
        "exactly {} workers, or set pipeline.data_parallel to 0 to derive it from WORLD_SIZE)",
        source, *world_size, dp, p, dp * p, dp * p));
  }
  return dp;
}

std::string replica0_rank_name(int64_t pp, const RankGrid& grid) {
  if (grid.world_size() == grid.size(Axis::pipeline)) return fmt::format("rank {}", pp);
  return fmt::format("rank {} (pipeline rank {} of replica 0)", grid.rank({0, 0, pp}), pp);
}

std::string format_rank_mapping(const RankGrid& grid) {
  std::string out = grid.describe() + "\n";
  for (const auto& pipeline : grid.groups(Axis::pipeline)) {
    const RankCoords first = grid.coords(pipeline.front());
    const std::string tp = grid.size(Axis::tensor) > 1 ? fmt::format(", tp rank {}", first.tp) : "";
    out += fmt::format("           replica {}{}: ranks {} (pp rank 0..{})\n", first.dp, tp,
                       core::format_rank_list(pipeline), grid.size(Axis::pipeline) - 1);
  }
  return out;
}

}  // namespace ppctl::plan
