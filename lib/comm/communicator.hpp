// One communicator interface for the pipeline: non-blocking point-to-point sends and receives with
// timed waits, plus barrier, all-gather and all-reduce. Implemented over LibTorch's c10d
// ProcessGroupGloo (CPU) and ProcessGroupNCCL (CUDA). The c10d headers stay in the .cpp files.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/job_store.hpp"
#include "comm/rendezvous.hpp"

namespace ppctl::comm {

/// Which c10d backend to build.
enum class BackendKind { Gloo, Nccl };

/// A posted send or receive. Finish it with Communicator::wait.
struct PendingOp {
  std::shared_ptr<void> work;  ///< the c10d Work (type-erased to keep c10d out of this header)
  std::string what;            ///< for messages, e.g. "receive of 1F3 activation from rank 0"
  int peer = -1;
};

/// One process group of a job: a name unique in the job (it prefixes the group's keys in the store)
/// and its members as global ranks; the group rank of a member is its index in `ranks`.
struct GroupSpec {
  std::string name;
  std::vector<int> ranks;
};

/// Point-to-point communication between the ranks of one job (or of one of its process groups:
/// then rank() and peers are group ranks).
/// Sends and receives only post the operation; wait() blocks until it completes or the timeout
/// passes. Gloo completes a send only once the peer has posted the matching receive (DESIGN.md), so
/// callers post all operations first and wait later. Both sides must agree on each tensor's shape
/// and dtype (Gloo checks only byte counts); ppctl derives them from the job spec.
class Communicator {
 public:
  virtual ~Communicator() = default;

  /// Connects rank `info.rank` of `info.world_size` through the TCPStore at
  /// info.master_addr:info.master_port and builds the backend's process group.
  /// `timeout` bounds the rendezvous and every later wait.
  /// Throws ppctl::CommError / CommTimeout naming the address when the store cannot be reached.
  /// Collectives (all_gather, all_reduce_sum) use tensors on `device` (a CUDA device for NCCL).
  static std::unique_ptr<Communicator> create(const RendezvousInfo& info, BackendKind backend,
                                              std::chrono::milliseconds timeout, at::Device device);

  /// Connects to the store once (hosting it when info.host_store; or uses `joined`, this rank's
  /// JobStore, when given) and builds one process group per entry of `groups`, in order, each over c10d::PrefixStore("ppctl/" + name). This rank must be a
  /// member of every group; every member must build its groups in the same global order (building
  /// a group waits for all its members). Same errors as create().
  static std::vector<std::unique_ptr<Communicator>> create_groups(
      const RendezvousInfo& info, BackendKind backend, std::chrono::milliseconds timeout,
      at::Device device, const std::vector<GroupSpec>& groups, const JobStore* joined = nullptr);

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  /// Posts sending `tensor` (contiguous; kept alive until waited) to `peer` with tag `tag` (>= 0).
  virtual PendingOp isend(const at::Tensor& tensor, int peer, int64_t tag, std::string what) = 0;
  /// Posts receiving into `tensor` (contiguous, preallocated with the agreed shape) from `peer`.
  virtual PendingOp irecv(at::Tensor& tensor, int peer, int64_t tag, std::string what) = 0;
  /// Blocks until `op` completes. Throws ppctl::CommTimeout ("timed out after S s waiting for
  /// WHAT (peer rank P)") or ppctl::CommError when the peer failed or disconnected.
  virtual void wait(const PendingOp& op) = 0;
  /// Never blocks: true once `op` has completed (it is then finished as wait() finishes it, and
  /// throws as wait() does when it failed), false while it is still in flight. Lets a caller release
  /// a send's buffer as soon as the transfer is done instead of at a later wait.
  virtual bool poll(const PendingOp& op) = 0;
  /// All ranks meet; bounded by the timeout.
  virtual void barrier() = 0;
  /// Every rank contributes `value`; returns all of them, indexed by rank. Bounded by the timeout.
  virtual std::vector<int64_t> all_gather(int64_t value) = 0;
  /// Every rank contributes `values` (the same length on every rank); returns their element-wise
  /// sum over the ranks in fp64, identical on every rank (c10d allreduce, ReduceOp::SUM, on the
  /// collectives' device). Bounded by the timeout.
  virtual std::vector<double> all_reduce_sum(const std::vector<double>& values) = 0;
  /// Sums `tensor` (contiguous, on the collectives' device, the same shape and dtype on every rank)
  /// element-wise over the ranks, in place; the result is bitwise identical on every rank. Bounded
  /// by the timeout.
  virtual void all_reduce_sum_inplace(at::Tensor& tensor) = 0;
  /// Posts the same sum as all_reduce_sum_inplace without waiting: `tensor` (kept alive by the
  /// caller until the op is waited) holds the sum once wait(op) returns. Every member must post the
  /// group's collectives in the same order. `what` names it in errors, e.g. "gradient bucket 2 of
  /// stage 1".
  virtual PendingOp all_reduce_sum_async(at::Tensor& tensor, std::string what) = 0;
  /// Posts a reduce-scatter (sum) of `tensor` in place, without waiting: `tensor` (contiguous, on the
  /// collectives' device, numel a multiple of the group's size W, the same shape on every rank) is
  /// summed element-wise over the ranks, and once wait(op) returns rank r's slice [r n/W, (r+1) n/W)
  /// holds its part of the sum; the rest of `tensor` is then unspecified. (c10d _reduce_scatter_base,
  /// torch.distributed.reduce_scatter_tensor, with the output a slice of the input as Megatron-Core's
  /// distributed optimizer posts it.) Same ordering rule and errors as all_reduce_sum_async. On Gloo it
  /// is an in-place all-reduce (the rest of `tensor` then holds the sum too): ProcessGroupGloo's
  /// _reduce_scatter_base would clone the whole input first.
  virtual PendingOp reduce_scatter_sum_async(at::Tensor& tensor, std::string what) = 0;
  /// Posts an all-gather in place, without waiting: rank r contributes slice [r n/W, (r+1) n/W) of
  /// `tensor` (same conditions as reduce_scatter_sum_async); once wait(op) returns, every rank's
  /// `tensor` holds every rank's slice, bitwise. (c10d _allgather_base,
  /// torch.distributed.all_gather_into_tensor.) Same ordering rule and errors as all_reduce_sum_async. On
  /// Gloo it is one in-place broadcast per slice from its owner (ProcessGroupGloo's _allgather_base
  /// gathers into a temporary of the whole tensor), waited for together.
  virtual PendingOp all_gather_inplace_async(at::Tensor& tensor, std::string what) = 0;
};

}  // namespace ppctl::comm
