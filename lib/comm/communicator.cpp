// Communicator over c10d: ProcessGroupGloo for CPU tensors, ProcessGroupNCCL for CUDA tensors.
#include "comm/communicator.hpp"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <string>

#include "core/error.hpp"

namespace ppctl::comm {
namespace {

using Work = c10d::Work;

class ProcessGroupCommunicator final : public Communicator {
 public:
  ProcessGroupCommunicator(c10::intrusive_ptr<c10d::Backend> backend, int rank, int world_size,
                           std::chrono::milliseconds timeout)
      : backend_(std::move(backend)), rank_(rank), world_size_(world_size), timeout_(timeout) {}

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
      throw_failure(op, e.what());
    }
    if (!completed) throw_failure(op, "did not complete");
  }

  void barrier() override {
    PendingOp op;
    op.what = "barrier";
    try {
      auto work = backend_->barrier();
      op.work = std::make_shared<c10::intrusive_ptr<Work>>(std::move(work));
    } catch (const std::exception& e) {
      throw CommError(fmt::format("rank {}: barrier failed: {}", rank_, e.what()));
    }
    wait(op);
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
      throw CommError(fmt::format("rank {}: cannot post {} (peer rank {}): {}", rank_, op.what, peer,
                                  e.what()));
    }
    return op;
  }

  [[noreturn]] void throw_failure(const PendingOp& op, const std::string& detail) const {
    const std::string lower = [&] {
      std::string s = detail;
      for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return s;
    }();
    const std::string message = fmt::format(
        "rank {}: {} (peer rank {}) failed after at most {:.0f} s: {}", rank_, op.what, op.peer,
        std::chrono::duration<double>(timeout_).count(), detail);
    if (lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos) {
      throw CommTimeout(message + " (fix: check that the peer rank is alive; raise "
                                  "runtime.comm_timeout_s for slow steps)");
    }
    throw CommError(message);
  }

  c10::intrusive_ptr<c10d::Backend> backend_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
};

c10::intrusive_ptr<c10d::Store> connect_store(const RendezvousInfo& info,
                                              std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(info.master_port);
  options.isServer = false;
  options.numWorkers = static_cast<size_t>(info.world_size);
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(info.master_addr, options);
  } catch (const std::exception& e) {
    throw CommError(fmt::format("rank {}: cannot reach the rendezvous store at {}:{}: {}", info.rank,
                                info.master_addr, info.master_port, e.what()));
  }
}

}  // namespace

std::unique_ptr<Communicator> Communicator::create(const RendezvousInfo& info, BackendKind backend,
                                                   std::chrono::milliseconds timeout) {
  auto store = c10::make_intrusive<c10d::PrefixStore>("ppctl/pp", connect_store(info, timeout));
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
      pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, info.rank, info.world_size, options);
    } else {
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, info.rank, info.world_size, options);
    }
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& e) {
    throw CommError(fmt::format("rank {}: cannot build the {} process group ({} ranks): {}",
                                info.rank, backend == BackendKind::Gloo ? "gloo" : "nccl",
                                info.world_size, e.what()));
  }
  return std::make_unique<ProcessGroupCommunicator>(std::move(pg), info.rank, info.world_size,
                                                    timeout);
}

}  // namespace ppctl::comm
