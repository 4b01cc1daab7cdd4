// Communicator over c10d: ProcessGroupGloo for CPU tensors, ProcessGroupNCCL for CUDA tensors.
#include "comm/communicator.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <string>

#include "comm/error_text.hpp"
#include "comm/hostlist.hpp"
#include "comm/socket_interface.hpp"
#include "comm/tcp_store.hpp"
#include "core/error.hpp"

namespace ppctl::comm {
namespace {

using Work = c10d::Work;
/// The c10d works behind one PendingOp: one, or several that complete it together (Gloo's in-place all-gather).
using Works = std::vector<c10::intrusive_ptr<Work>>;

class ProcessGroupCommunicator final : public Communicator {
 public:
  /// `members`: the group's global ranks, by group rank; `hosts`: their host names (for messages).
  ProcessGroupCommunicator(c10::intrusive_ptr<c10d::Backend> backend, bool gloo, int rank, int world_size,
                           std::chrono::milliseconds timeout, at::Device device, std::string name,
                           std::vector<int> members, std::vector<std::string> hosts)
      : backend_(std::move(backend)),
        gloo_(gloo),
        rank_(rank),
        world_size_(world_size),
        timeout_(timeout),
        device_(device),
        name_(std::move(name)),
        members_(std::move(members)),
        hosts_(std::move(hosts)) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  PendingOp isend(const at::Tensor& tensor, int peer, int64_t tag, std::string what) override {
    std::vector<at::Tensor> tensors{tensor};
    return post([&] { return backend_->send(tensors, peer, static_cast<int>(tag)); }, peer,
                std::move(what));
  }

  PendingOp irecv(at::Tensor& tensor, int peer, int64_t tag, std::string what) override {
    std::vector<at::Tensor> tensors{tensor};
    return post([&] { return backend_->recv(tensors, peer, static_cast<int>(tag)); }, peer,
                std::move(what));
  }

  void wait(const PendingOp& op) override {
    const auto& works = *static_cast<Works*>(op.work.get());
    // One timeout for the whole operation, however many works it took.
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (const auto& work : works) {
      bool completed = false;
      try {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        completed = work->wait(std::max(left, std::chrono::milliseconds(1)));
      } catch (const std::exception& e) {
        throw_failure(op, error_text(e));
      }
      if (!completed) throw_failure(op, "did not complete");
    }
  }

  bool poll(const PendingOp& op) override {
    const auto& works = *static_cast<Works*>(op.work.get());
    bool done = true;
    try {
      for (const auto& work : works) done = done && work->isCompleted();
    } catch (const std::exception& e) {
      throw_failure(op, error_text(e));
    }
    if (done) wait(op);  // rethrows a failure; returns at once otherwise
    return done;
  }

  void barrier() override {
    wait(post([&] { return backend_->barrier(); }, -1, "barrier"));
  }

  std::vector<int64_t> all_gather(int64_t value) override {
    const auto options = at::TensorOptions().dtype(at::kLong).device(device_);
    std::vector<at::Tensor> input{at::full({1}, value, options)};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int r = 0; r < world_size_; ++r) output[0].push_back(at::empty({1}, options));
    wait(post([&] { return backend_->allgather(output, input); }, -1, "all-gather"));
    std::vector<int64_t> values;
    for (const auto& t : output[0]) values.push_back(t.cpu().item<int64_t>());
    return values;
  }

  std::vector<double> all_reduce_sum(const std::vector<double>& values) override {
    if (values.empty()) return {};
    auto tensor = at::tensor(values, at::TensorOptions().dtype(at::kDouble)).to(device_);
    all_reduce_sum_inplace(tensor);
    const auto sums = tensor.cpu().contiguous();
    return {sums.data_ptr<double>(), sums.data_ptr<double>() + sums.numel()};
  }

  void all_reduce_sum_inplace(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions reduce;
    reduce.reduceOp = c10d::ReduceOp::SUM;
    wait(post([&] { return backend_->allreduce(tensors, reduce); }, -1, "all-reduce"));
  }

  PendingOp all_reduce_sum_async(at::Tensor& tensor, std::string what) override {
    std::vector<at::Tensor> tensors{tensor};
    c10d::AllreduceOptions reduce;
    reduce.reduceOp = c10d::ReduceOp::SUM;
    return post([&] { return backend_->allreduce(tensors, reduce); }, -1, "all-reduce of " + what);
  }

  PendingOp reduce_scatter_sum_async(at::Tensor& tensor, std::string what) override {
    auto shard = own_slice(tensor, what);
    if (gloo_) {
      // ProcessGroupGloo's _reduce_scatter_base clones the whole input and all-reduces the clone (torch
      // 2.11): 4 B per parameter more at every REDUCE_GRAD. An in-place all-reduce moves the same bytes and
      // leaves the sum in this rank's slice (and in the rest, which the contract leaves unspecified).
      return all_reduce_sum_async(tensor, std::move(what));
    }
    c10d::ReduceScatterOptions reduce;
    reduce.reduceOp = c10d::ReduceOp::SUM;
    return post([&] { return backend_->_reduce_scatter_base(shard, tensor, reduce); }, -1,
                "reduce-scatter of " + what);
  }

  PendingOp all_gather_inplace_async(at::Tensor& tensor, std::string what) override {
    auto shard = own_slice(tensor, what);
    if (gloo_) {
      // ProcessGroupGloo's _allgather_base gathers into a temporary of the whole output. One in-place
      // broadcast per slice, from the rank that owns it, moves the same bytes into place.
      const int64_t slice = shard.numel();
      return post_works(
          [&](Works& works) {
            for (int r = 0; r < world_size_; ++r) {
              std::vector<at::Tensor> part{tensor.view({-1}).narrow(0, r * slice, slice)};
              c10d::BroadcastOptions options;
              options.rootRank = r;
              works.push_back(backend_->broadcast(part, options));
            }
          },
          -1, "all-gather of " + what);
    }
    return post([&] { return backend_->_allgather_base(tensor, shard); }, -1, "all-gather of " + what);
  }

 private:
  template <typename Post>
  PendingOp post(Post&& post_op, int peer, std::string what) {
    return post_works([&](Works& works) { works.push_back(post_op()); }, peer, std::move(what));
  }

  /// Posts what `fill` adds to the operation's works, in order, as one operation waited for together.
  template <typename Fill>
  PendingOp post_works(Fill&& fill, int peer, std::string what) {
    PendingOp op;
    op.peer = peer;
    op.what = std::move(what);
    auto works = std::make_shared<Works>();
    try {
      fill(*works);
    } catch (const std::exception& e) {
      throw CommError(fmt::format("rank {}: cannot post {}: {}", global_rank(), describe(op), error_text(e)));
    }
    op.work = std::move(works);
    return op;
  }

  /// This rank's slice [r n/W, (r+1) n/W) of `tensor`, whose numel must divide by W.
  at::Tensor own_slice(const at::Tensor& tensor, const std::string& what) const {
    const int64_t size = backend_->getSize();
    if (tensor.numel() % size != 0) {
      throw InternalError(fmt::format("{}: {} elements do not split into {} equal slices", what, tensor.numel(), size));
    }
    const int64_t slice = tensor.numel() / size;
    return tensor.view({-1}).narrow(0, rank_ * slice, slice);
  }

  /// This process's rank in the job (messages use global ranks, not group ranks).
  int global_rank() const { return members_[static_cast<size_t>(rank_)]; }

  /// "WHAT (peer: rank G on HOST)" for point-to-point operations (G: the peer's global rank),
  /// "WHAT in group 'NAME' (ranks ... on HOSTS)" for collectives.
  std::string describe(const PendingOp& op) const {
    if (op.peer >= 0 && op.peer < static_cast<int>(members_.size())) {
      const auto peer = static_cast<size_t>(op.peer);
      return fmt::format("{} (peer: rank {} on {})", op.what, members_[peer], hosts_[peer]);
    }
    std::vector<std::string> hosts = hosts_;
    std::sort(hosts.begin(), hosts.end());
    hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
    return fmt::format("{} in group '{}' ({} on {})", op.what, name_, rank_list(members_),
                       fmt::join(hosts, ", "));
  }

  [[noreturn]] void throw_failure(const PendingOp& op, const std::string& detail) const {
    const std::string lower = [&] {
      std::string s = detail;
      for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    }();
    if (lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos) {
      throw CommTimeout(fmt::format(
          "rank {}: {} timed out after {:.0f} s: {} (fix: check that the peer rank is alive; raise "
          "runtime.comm_timeout_s for slow steps)",
          global_rank(), describe(op), std::chrono::duration<double>(timeout_).count(), detail));
    }
    throw CommError(fmt::format("rank {}: {} failed: {}", global_rank(), describe(op), detail));
  }

  c10::intrusive_ptr<c10d::Backend> backend_;
  bool gloo_;  // ProcessGroupGloo: reduce-scatter and all-gather in place by other collectives (see there)
  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  at::Device device_;
  std::string name_;
  std::vector<int> members_;
  std::vector<std::string> hosts_;
};

/// One process group over `store`: this process is `rank` of `size`. `interfaces`: Gloo's network
/// interfaces (gloo_socket_interfaces), empty for the default choice. `members`, `hosts`: the group's
/// global ranks and their host names, for messages.
std::unique_ptr<Communicator> make_group(const c10::intrusive_ptr<c10d::Store>& store,
                                         const RendezvousInfo& info, int rank, int size,
                                         const std::string& name, BackendKind backend,
                                         std::chrono::milliseconds timeout, at::Device device,
                                         const std::vector<std::string>& interfaces,
                                         const std::vector<int>& members, std::vector<std::string> hosts) {
  c10::intrusive_ptr<c10d::Backend> pg;
  try {
    if (backend == BackendKind::Gloo) {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      // The interfaces the user named (GLOO_SOCKET_IFNAME); else loopback for a local job, else the
      // address this machine's hostname resolves to.
      if (!interfaces.empty()) {
        for (const auto& ifname : interfaces) {
          options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
        }
      } else if (info.master_addr == "127.0.0.1" || info.master_addr == "localhost") {
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      } else {
        options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
    } else {
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
    }
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(fmt::format("rank {}: cannot build the {} process group '{}' ({} ranks): {}",
                                info.rank, backend == BackendKind::Gloo ? "gloo" : "nccl", name,
                                size, error_text(e)));
  }
  return std::make_unique<ProcessGroupCommunicator>(std::move(pg), backend == BackendKind::Gloo, rank, size, timeout,
                                                    device, name, members, std::move(hosts));
}

}  // namespace

std::unique_ptr<Communicator> Communicator::create(const RendezvousInfo& info, BackendKind backend,
                                                   std::chrono::milliseconds timeout,
                                                   at::Device device) {
  std::vector<int> all(static_cast<size_t>(info.world_size));
  for (int r = 0; r < info.world_size; ++r) all[static_cast<size_t>(r)] = r;
  return std::move(create_groups(info, backend, timeout, device, {{"pp", all}}).front());
}

std::vector<std::unique_ptr<Communicator>> Communicator::create_groups(
    const RendezvousInfo& info, BackendKind backend, std::chrono::milliseconds timeout,
    at::Device device, const std::vector<GroupSpec>& groups, const JobStore* joined) {
  const auto interfaces = backend == BackendKind::Gloo ? gloo_socket_interfaces(environment_map())
                                                       : std::vector<std::string>{};
  const c10::intrusive_ptr<c10d::Store> store = joined != nullptr ? joined->impl().store : join_store(info, timeout);
  await_every_rank(*store, info, timeout);
  // The host of every rank this one talks to, for messages about a lost peer.
  std::vector<int> peers;
  for (const auto& group : groups) peers.insert(peers.end(), group.ranks.begin(), group.ranks.end());
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  std::map<int, std::string> host_of;
  try {
    const auto hosts = rank_hosts(*store, peers);
    for (size_t i = 0; i < peers.size(); ++i) host_of[peers[i]] = hosts[i];
  } catch (const std::exception& e) {
    throw CommError(fmt::format("rank {}: the rendezvous store at {}:{} failed while the ranks joined: {}",
                                info.rank, info.master_addr, info.master_port, error_text(e)));
  }
  const auto group_hosts = [&](const std::vector<int>& ranks) {
    std::vector<std::string> hosts;
    for (int rank : ranks) hosts.push_back(host_of[rank]);
    return hosts;
  };
  std::vector<std::unique_ptr<Communicator>> out;
  for (const auto& group : groups) {
    const auto it = std::find(group.ranks.begin(), group.ranks.end(), info.rank);
    if (it == group.ranks.end()) {
      throw InternalError(fmt::format("rank {} is not a member of process group '{}'", info.rank,
                                      group.name));
    }
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("ppctl/" + group.name, store);
    out.push_back(make_group(prefixed, info, static_cast<int>(it - group.ranks.begin()),
                             static_cast<int>(group.ranks.size()), group.name, backend, timeout,
                             device, interfaces, group.ranks, group_hosts(group.ranks)));
  }
  return out;
}

}  // namespace ppctl::comm
