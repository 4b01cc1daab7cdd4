// The process groups of a worker (see worker_groups.hpp).
#include "comm/worker_groups.hpp"

#include <fmt/format.h>

namespace ppctl::comm {
namespace {

std::vector<int> as_int(const std::vector<int64_t>& ranks) { return {ranks.begin(), ranks.end()}; }

}  // namespace

WorkerGroups make_worker_groups(const RendezvousInfo& info, const plan::Layout& layout,
                                bool tie_embeddings, BackendKind backend,
                                std::chrono::milliseconds timeout, at::Device device,
                                const JobStore* store) {
  const plan::RankGrid grid = layout.grid();
  const int64_t tp = grid.size(plan::Axis::tensor), dp = grid.size(plan::Axis::data),
                pp = grid.size(plan::Axis::pipeline);
  const auto me = grid.coords(info.rank);
  std::vector<GroupSpec> specs;
  // Names are unique in the job: each names the coordinates its members share.
  if (tp > 1) {
    specs.push_back({fmt::format("tp/d{}p{}", me.dp, me.pp), as_int(grid.group(plan::Axis::tensor, info.rank))});
  }
  if (pp > 1) {
    specs.push_back({fmt::format("pp/t{}d{}", me.tp, me.dp), as_int(grid.group(plan::Axis::pipeline, info.rank))});
  }
  if (dp > 1) {
    specs.push_back({fmt::format("dp/t{}p{}", me.tp, me.pp), as_int(grid.group(plan::Axis::data, info.rank))});
  }
  const int64_t first = layout.stage_to_rank.front(), last = layout.stage_to_rank.back();
  const bool embedding = tie_embeddings && first != last && (me.pp == first || me.pp == last);
  if (embedding) {  // the holders of this tp rank's tied copies (the same vocabulary rows), replica by replica
    std::vector<int> members;
    for (int64_t d = 0; d < dp; ++d) {
      members.push_back(static_cast<int>(grid.rank({me.tp, d, first})));
      members.push_back(static_cast<int>(grid.rank({me.tp, d, last})));
    }
    specs.push_back({fmt::format("emb/t{}", me.tp), members});
  }
  WorkerGroups groups;
  if (specs.empty()) return groups;
  auto built = Communicator::create_groups(info, backend, timeout, device, specs, store);
  size_t next = 0;
  if (tp > 1) groups.tensor_parallel = std::move(built[next++]);
  if (pp > 1) groups.pipeline = std::move(built[next++]);
  if (dp > 1) groups.data_parallel = std::move(built[next++]);
  if (embedding) groups.embedding = std::move(built[next++]);
  return groups;
}

}  // namespace ppctl::comm
