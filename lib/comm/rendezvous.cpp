// Rendezvous from the environment and the launcher-hosted TCPStore server.
#include "comm/rendezvous.hpp"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cstdlib>
#include <optional>

#include "comm/error_text.hpp"
#include "core/error.hpp"

namespace ppctl::comm {
namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

int env_int(const char* name, std::optional<int> fallback, int min, int max) {
  auto text = env(name);
  if (!text) {
    if (fallback) return *fallback;
    throw CommError(fmt::format(
        "environment variable {} is not set (fix: start workers with `ppctl train`, or set RANK, "
        "WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun does)",
        name));
  }
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || errno != 0 || value < min || value > max) {
    throw CommError(fmt::format("environment variable {}='{}' must be an integer in [{}, {}]", name,
                                *text, min, max));
  }
  return static_cast<int>(value);
}

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

RendezvousInfo rendezvous_from_env() {
  RendezvousInfo info;
  info.world_size = env_int("WORLD_SIZE", std::nullopt, 1, 1 << 20);
  info.rank = env_int("RANK", std::nullopt, 0, info.world_size - 1);
  info.local_rank = env_int("LOCAL_RANK", 0, 0, info.world_size - 1);
  info.master_addr = env("MASTER_ADDR").value_or("");
  if (info.master_addr.empty()) {
    throw CommError("environment variable MASTER_ADDR is not set or empty (fix: set it to the host "
                    "of rank 0's TCPStore)");
  }
  info.master_port = env_int("MASTER_PORT", std::nullopt, 1, 65535);
  return info;
}

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

}  // namespace ppctl::comm
