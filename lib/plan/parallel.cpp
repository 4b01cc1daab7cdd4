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

int64_t global_rank(RankCoords coords, int64_t dp_size) { return coords.pp * dp_size + coords.dp; }

RankCoords rank_coords(int64_t rank, int64_t dp_size) { return {rank % dp_size, rank / dp_size}; }

std::string replica0_rank_name(int64_t pp, int64_t dp_size) {
  if (dp_size <= 1) return fmt::format("rank {}", pp);
  return fmt::format("rank {} (pipeline rank {} of replica 0)", global_rank({0, pp}, dp_size), pp);
}

std::vector<int64_t> pipeline_group(int64_t dp, int64_t dp_size, int64_t pp_size) {
  std::vector<int64_t> ranks;
  for (int64_t pp = 0; pp < pp_size; ++pp) ranks.push_back(global_rank({dp, pp}, dp_size));
  return ranks;
}

std::vector<int64_t> data_parallel_group(int64_t pp, int64_t dp_size, int64_t /*pp_size*/) {
  std::vector<int64_t> ranks;
  for (int64_t dp = 0; dp < dp_size; ++dp) ranks.push_back(global_rank({dp, pp}, dp_size));
  return ranks;
}

std::string format_rank_mapping(int64_t dp_size, int64_t pp_size) {
  std::string out = fmt::format("dp {} x pp {} = {} ranks; rank = pp_rank x {} + dp_rank\n",
                                dp_size, pp_size, dp_size * pp_size, dp_size);
  for (int64_t dp = 0; dp < dp_size; ++dp) {
    out += fmt::format("           replica {}: ranks {} (pp rank 0..{})\n", dp,
                       core::format_rank_list(pipeline_group(dp, dp_size, pp_size)), pp_size - 1);
  }
  return out;
}

}  // namespace ppctl::plan
