// Data parallelism across pipeline replicas: the process groups of a dp x pp job and the once-per-step
// gradient all-reduce (averaged) over a stage's replicas.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "model/stage.hpp"
#include "plan/layout.hpp"
#include "plan/parallel.hpp"

namespace ppctl::train {

/// The communicators of one rank. A kind of group whose groups have one member is not built (null):
/// `pipeline` when p = 1, `data_parallel` when dp = 1.
struct WorkerGroups {
  std::unique_ptr<comm::Communicator> pipeline;       ///< this replica's p ranks; group rank = pp rank
  std::unique_ptr<comm::Communicator> data_parallel;  ///< this pipeline rank in every replica; = dp rank
  /// With tied embeddings on two pipeline ranks: the replica's ranks holding the first and the last
  /// stage (train/tied_embeddings.hpp); null elsewhere, and when one rank holds both.
  std::unique_ptr<comm::Communicator> embedding;
};

/// The process groups of global rank `info.rank` in `layout` (rank mapping of plan/parallel.hpp):
/// first its pipeline group ("pp/dD"), then its data-parallel group ("dp/pP"), then, with tied
/// embeddings, its embedding group ("emb/dD"); every rank builds them in this order, so building
/// (which waits for a group's members) cannot deadlock.
/// Nothing is built for a one-rank job. `store`: this rank's connection to the job's store when it
/// has one already (torchrun / Slurm: made for the run directory), else the groups join it.
WorkerGroups make_worker_groups(const comm::RendezvousInfo& info, const plan::Layout& layout,
                                bool tie_embeddings, comm::BackendKind backend,
                                std::chrono::milliseconds timeout, at::Device device,
                                const comm::JobStore* store = nullptr);

/// Sums every gradient of `stages` over `group` and divides by its size: afterwards each replica
/// holds the gradient of the mean loss over the global batch, bitwise identical on every replica.
/// One all-reduce over all gradients flattened into one buffer (parameters without a gradient
/// count as zero and get one). Bounded by the group's timeout.
void average_gradients(const std::vector<model::StageModule>& stages, comm::Communicator& group);

}  // namespace ppctl::train
