// Communicator over c10d: ProcessGroupGloo for CPU tensors, ProcessGroupNCCL for CUDA tensors.
#include "comm/communicator.hpp"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "comm/error_text.hpp"
#include "comm/tcp_store.hpp"
#include "core/error.hpp"

namespace ppctl::comm {
namespace {

using Work = c10d::Work;

class ProcessGroupCommunicator final : public Communicator {
 public:
  ProcessGroupCommunicator(c10::intrusive_ptr<c10d::Backend> backend, int rank, int world_size,
                           std::chrono::milliseconds timeout, at::Device device)
      : backend_(std::move(backend)),
        rank_(rank),
        world_size_(world_size),
        timeout_(timeout),
        device_(device) {}

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
    auto* work = static_cast<c10::intrusive_ptr<Work>*>(op.work.get());
    bool completed = false;
    try {
      completed = (*work)->wait(timeout_);
    } catch (const std::exception& e) {
      throw_failure(op, error_text(e));
    }
    if (!completed) throw_failure(op, "did not complete");
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

 private:
  template <typename Post>
  PendingOp post(Post&& post_op, int peer, std::string what) {
    PendingOp op;
    op.peer = peer;
    op.what = std::move(what);
    try {
      op.work = std::make_shared<c10::intrusive_ptr<Work>>(post_op());
    } catch (const std::exception& e) {
      throw CommError(fmt::format("rank {}: cannot post {}: {}", rank_, describe(op), error_text(e)));
    }
    return op;
  }

  /// "WHAT (peer rank P)" for point-to-point operations, "WHAT" for collectives.
  static std::string describe(const PendingOp& op) {
    return op.peer >= 0 ? fmt::format("{} (peer rank {})", op.what, op.peer) : op.what;
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
          rank_, describe(op), std::chrono::duration<double>(timeout_).count(), detail));
    }
    throw CommError(fmt::format("rank {}: {} failed: {}", rank_, describe(op), detail));
  }

  c10::intrusive_ptr<c10d::Backend> backend_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  at::Device device_;
};

/// One process group over `store`: this process is `rank` of `size`.
std::unique_ptr<Communicator> make_group(const c10::intrusive_ptr<c10d::Store>& store,
                                         const RendezvousInfo& info, int rank, int size,
                                         const std::string& name, BackendKind backend,
                                         std::chrono::milliseconds timeout, at::Device device) {
  c10::intrusive_ptr<c10d::Backend> pg;
  try {
    if (backend == BackendKind::Gloo) {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      // Gloo picks the interface that reaches MASTER_ADDR's side; loopback for a local job.
      if (info.master_addr == "127.0.0.1" || info.master_addr == "localhost") {
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
  return std::make_unique<ProcessGroupCommunicator>(std::move(pg), rank, size, timeout, device);
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
  const c10::intrusive_ptr<c10d::Store> store = joined != nullptr ? joined->impl().store : join_store(info, timeout);
  await_every_rank(*store, info, timeout);
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
                             device));
  }
  return out;
}

}  // namespace ppctl::comm
