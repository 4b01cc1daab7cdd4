// The process groups a worker joins, one kind per axis of the rank grid (plan/rank_grid.hpp) that has more than
// one rank, and the tied embeddings' group (the gradient reduction over them is optim/grad_buffers.hpp).
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "plan/layout.hpp"
#include "plan/parallel.hpp"

namespace ppctl::comm {

/// The communicators of one rank. A kind of group whose groups have one member is not built (null):
/// `tensor_parallel` when t = 1, `pipeline` when p = 1, `data_parallel` when dp = 1.
struct WorkerGroups {
  std::unique_ptr<Communicator> tensor_parallel;  ///< this stage's t ranks (adjacent); group rank = tp rank
  std::unique_ptr<Communicator> pipeline;       ///< this replica's p ranks of this tp rank; group rank = pp rank
  std::unique_ptr<Communicator> data_parallel;  ///< this (tp, pp) coordinate in every replica; = dp rank
  /// With tied embeddings on two pipeline ranks: the ranks of this tp rank holding the first or the last stage,
  /// in every replica (2 x dp ranks; optim/grad_buffers.hpp sums the tied copies over them); null
  /// elsewhere, and when one pipeline rank holds both stages.
  std::unique_ptr<Communicator> embedding;
};

/// The process groups of global rank `info.rank` in `layout` (rank mapping of plan/parallel.hpp):
/// first its tensor-parallel group ("tp/dDpP"), then its pipeline group ("pp/tTdD"), then its data-parallel group
/// ("dp/tTpP"), then, with tied embeddings, the embedding group ("emb/tT"); every rank builds them in this order, so
/// building (which waits for a group's members) cannot deadlock.
/// Nothing is built for a one-rank job. `store`: this rank's connection to the job's store when it
/// has one already (torchrun / Slurm: made for the run directory), else the groups join it.
WorkerGroups make_worker_groups(const RendezvousInfo& info, const plan::Layout& layout,
                                bool tie_embeddings, BackendKind backend,
                                std::chrono::milliseconds timeout, at::Device device,
                                const JobStore* store = nullptr);

}  // namespace ppctl::comm
