// Rendezvous from the environment and the launcher-hosted TCPStore server.
#include "comm/rendezvous.hpp"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "comm/error_text.hpp"
#include "core/error.hpp"

namespace ppctl::comm {
namespace {

/// The launcher hosts the store on `host`, so it must resolve to an address of this machine: try to
/// bind a socket to it (port 0), which fails at once otherwise, instead of a connect that would time
/// out. Throws CommError naming runtime.master_addr.
void check_local_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    throw CommError(fmt::format("runtime.master_addr '{}' does not resolve: {} (fix: use 127.0.0.1 "
                                "to run on this machine, or a name or address of this machine)",
                                host, ::gai_strerror(rc)));
  }
  int bind_errno = 0;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    bind_errno = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    ::close(fd);
    if (bind_errno == 0) break;
  }
  ::freeaddrinfo(found);
  if (bind_errno != 0) {
    throw CommError(fmt::format("runtime.master_addr '{}' is not an address of this machine ({}); "
                                "the local launcher hosts the rendezvous store itself (fix: use "
                                "127.0.0.1, or this machine's own name or address)",
                                host, std::strerror(bind_errno)));
  }
}

}  // namespace

RendezvousInfo rendezvous_from_env() { return local_worker_identity(environment_map()); }

struct StoreServer::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

StoreServer::StoreServer(const std::string& host, int port, int world_size,
                         std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = true;
  options.numWorkers = static_cast<size_t>(world_size);
  options.waitWorkers = false;  // workers connect after the launcher spawns them
  options.timeout = timeout;
  check_local_address(host);
  try {
    impl_->store = c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    throw CommError(fmt::format(
        "cannot host the rendezvous store on {}:{}: {} (fix: runtime.master_addr must be an address "
        "of this machine, 127.0.0.1 for a local job; runtime.master_port must be free, or 0 for any "
        "free port)",
        host, port, error_text(e)));
  }
}

StoreServer::~StoreServer() = default;

int StoreServer::port() const { return impl_->store->getPort(); }

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
