// Rendezvous from the environment and the launcher-hosted TCPStore server.
#include "comm/rendezvous.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <random>

#include "comm/error_text.hpp"
#include "comm/tcp_store.hpp"
#include "core/error.hpp"

namespace ppctl::comm {
namespace {

/// A random identity for one start of a local job: 128 bits from std::random_device, and the pid.
std::string new_job_id() {
  std::random_device random;
  std::string id = fmt::format("local {}-", ::getpid());
  for (int i = 0; i < 4; ++i) id += fmt::format("{:08x}", random());
  return id;
}

}  // namespace

RendezvousInfo rendezvous_from_env() { return local_worker_identity(environment_map()); }

struct StoreServer::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  std::string job_id;
};

StoreServer::StoreServer(const std::string& host, int port, int world_size,
                         std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->job_id = new_job_id();
  impl_->store = host_store(host, port, world_size, timeout, impl_->job_id, LaunchMode::Local);
}

StoreServer::~StoreServer() = default;

int StoreServer::port() const { return impl_->store->getPort(); }

const std::string& StoreServer::job_id() const { return impl_->job_id; }

std::optional<std::string> StoreServer::try_get(const std::string& key) const {
  try {
    if (!impl_->store->check({key})) return std::nullopt;
    const auto value = impl_->store->get(key);  // set once seen: get does not wait
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    throw CommError(fmt::format("cannot read key {} from the rendezvous store: {}", key, error_text(e)));
  }
}

}  // namespace ppctl::comm
