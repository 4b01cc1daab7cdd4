// Process groups of a dp x pp job (see data_parallel.hpp).
#include "train/data_parallel.hpp"

#include <fmt/format.h>

namespace ppctl::train {
namespace {

std::vector<int> as_int(const std::vector<int64_t>& ranks) { return {ranks.begin(), ranks.end()}; }

}  // namespace

WorkerGroups make_worker_groups(const comm::RendezvousInfo& info, const plan::Layout& layout,
                                bool tie_embeddings, comm::BackendKind backend,
                                std::chrono::milliseconds timeout, at::Device device,
                                const comm::JobStore* store) {
  const int64_t dp = layout.data_parallel, pp = layout.pipeline_size;
  const auto me = plan::rank_coords(info.rank, dp);
  std::vector<comm::GroupSpec> specs;
  if (pp > 1) specs.push_back({fmt::format("pp/d{}", me.dp), as_int(plan::pipeline_group(me.dp, dp, pp))});
  if (dp > 1) specs.push_back({fmt::format("dp/p{}", me.pp), as_int(plan::data_parallel_group(me.pp, dp, pp))});
  const int64_t first = layout.stage_to_rank.front(), last = layout.stage_to_rank.back();
  const bool embedding = tie_embeddings && first != last && (me.pp == first || me.pp == last);
  if (embedding) {  // the tied copies' holders in every replica, replica by replica
    std::vector<int> members;
    for (int64_t d = 0; d < dp; ++d) {
      members.push_back(static_cast<int>(plan::global_rank({d, first}, dp)));
      members.push_back(static_cast<int>(plan::global_rank({d, last}, dp)));
    }
    specs.push_back({"emb", members});
  }
  WorkerGroups groups;
  if (specs.empty()) return groups;
  auto built = comm::Communicator::create_groups(info, backend, timeout, device, specs, store);
  size_t next = 0;
  if (pp > 1) groups.pipeline = std::move(built[next++]);
  if (dp > 1) groups.data_parallel = std::move(built[next++]);
  if (embedding) groups.embedding = std::move(built[next++]);
  return groups;
}

}  // namespace ppctl::train
