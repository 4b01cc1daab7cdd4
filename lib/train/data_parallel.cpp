// Process groups of a dp x pp job and the data-parallel gradient average (see data_parallel.hpp).
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
  if (embedding) {
    specs.push_back({fmt::format("emb/d{}", me.dp),
                     {static_cast<int>(plan::global_rank({me.dp, first}, dp)),
                      static_cast<int>(plan::global_rank({me.dp, last}, dp))}});
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

void average_gradients(const std::vector<model::StageModule>& stages, comm::Communicator& group) {
  std::vector<torch::Tensor> grads;
  for (const auto& stage : stages) {
    for (auto& p : stage->parameters()) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grads.push_back(p.grad());
    }
  }
  if (grads.empty()) return;
  std::vector<torch::Tensor> flat_parts;
  flat_parts.reserve(grads.size());
  for (const auto& g : grads) flat_parts.push_back(g.reshape({-1}));
  auto flat = torch::cat(flat_parts);
  group.all_reduce_sum_inplace(flat);
  flat.div_(static_cast<double>(group.world_size()));
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& g : grads) {
    g.copy_(flat.narrow(0, offset, g.numel()).view_as(g));
    offset += g.numel();
  }
}

}  // namespace ppctl::train
