// The job's c10d TCPStore: hosted on one interface, joined within the timeout, identity-checked.
#include "comm/tcp_store.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <c10/util/Logging.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include "comm/error_text.hpp"
#include "comm/hostlist.hpp"
#include "core/bad_input.hpp"
#include "core/error.hpp"

namespace ppctl::comm {
namespace {

using StorePtr = c10::intrusive_ptr<c10d::TCPStore>;
using Clock = std::chrono::steady_clock;

/// Keeps c10d's own log lines (each failed connect attempt with a C++ backtrace) off stderr while it
/// lives: ppctl reports the outcome itself. c10d logs through c10's level (c10/util/Logging.h, the
/// TORCH_CPP_LOG_LEVEL variable); 3 = fatal only.
class QuietC10dLog {
 public:
  QuietC10dLog() : saved_(FLAGS_caffe2_log_level) { FLAGS_caffe2_log_level = 3; }
  ~QuietC10dLog() {
    if (!keep_quiet_) FLAGS_caffe2_log_level = saved_;
  }
  QuietC10dLog(const QuietC10dLog&) = delete;
  QuietC10dLog& operator=(const QuietC10dLog&) = delete;
  /// A connect attempt was abandoned on its own thread (finish_by) and the process is about to end with ppctl's
  /// error: that thread's later c10d lines (its own timeout, with a backtrace) stay off stderr too.
  void stay_quiet() { keep_quiet_ = true; }

 private:
  int saved_;
  bool keep_quiet_ = false;
};

/// Runs `make` on a thread of its own and waits for it until `deadline`: its result, its exception
/// rethrown, or nullopt when it has not finished by then. c10d's client can block in a TCP read
/// without a timeout (a program holding the port accepts and never answers); such a thread is left
/// behind, blocked, and the caller ends the process with an error.
template <typename Ptr>
std::optional<Ptr> finish_by(Clock::time_point deadline, std::function<Ptr()> make) {
  auto task = std::make_shared<std::packaged_task<Ptr()>>(std::move(make));
  auto result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (result.wait_until(deadline) != std::future_status::ready) return std::nullopt;
  return result.get();
}

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    return IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
  }
  return false;
}

/// The wildcard address (0.0.0.0 or ::): listening there means every interface.
bool is_wildcard(const sockaddr* address) {
  if (address->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (address->sa_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr);
  return false;
}

/// Warns (once per process) that the store listens on every interface because the address given is
/// the wildcard; docs/launching.md, "Rendezvous, ports and exposure".
void warn_wildcard(const std::string& host, int port, const StoreRole& role) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  spdlog::warn("{} '{}' is the wildcard address: the rendezvous store listens on port {} of every "
               "interface of this machine, and c10d's store has no authentication, so anyone who can "
               "reach this machine can read and write the job's keys (fix: {} as the other ranks reach "
               "it on the job's network, e.g. the node's cluster address)",
               role.addr_name, host, port, role.addr_fix);
}

/// A listening socket and the port it is bound to.
struct Listener {
  int fd = -1;
  int port = 0;
};

/// Why bind(2) failed, in a user's words.
std::string bind_reason(int err, const std::string& host, int port, const StoreRole& role) {
  if (err == EADDRINUSE) {
    return fmt::format("port {} is already in use (another program, or another job's store, holds "
                       "it)",
                       port);
  }
  if (err == EADDRNOTAVAIL) {
    return fmt::format("{} '{}' is not an address of this machine", role.addr_name, host);
  }
  return std::strerror(err);
}

/// A listening TCP socket on `host`'s address and `port` (0: any free port); see host_store for the
/// interface chosen. Throws CommError naming host:port, the reason and the fix.
Listener listen_on(const std::string& host, int port, LaunchMode mode, const StoreRole& role) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    throw AddressError(fmt::format("{} cannot host the rendezvous store: {} '{}' does not resolve: {} "
                                   "(fix: {})",
                                   role.host_name, role.addr_name, host, ::gai_strerror(rc),
                                   role.addr_fix));
  }
  int first_errno = 0;
  Listener listener;
  for (const addrinfo* a = found; a != nullptr && listener.fd < 0; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    sockaddr_storage address{};
    std::memcpy(&address, a->ai_addr, a->ai_addrlen);
    auto* generic = reinterpret_cast<sockaddr*>(&address);
    const bool any_interface = mode != LaunchMode::Local && is_loopback(generic) &&
                               host != "localhost" && host.rfind("127.", 0) != 0 && host != "::1";
    if (a->ai_family == AF_INET) {
      auto* v4 = reinterpret_cast<sockaddr_in*>(generic);
      v4->sin_port = htons(static_cast<std::uint16_t>(port));
      if (any_interface) v4->sin_addr.s_addr = htonl(INADDR_ANY);
    } else {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(generic);
      v6->sin6_port = htons(static_cast<std::uint16_t>(port));
      if (any_interface) v6->sin6_addr = in6addr_any;
    }
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      first_errno = first_errno != 0 ? first_errno : errno;
      continue;
    }
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, generic, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      first_errno = first_errno != 0 ? first_errno : errno;
      ::close(fd);
      continue;
    }
    socklen_t length = sizeof address;
    ::getsockname(fd, generic, &length);
    listener.fd = fd;
    listener.port = ntohs(a->ai_family == AF_INET ? reinterpret_cast<sockaddr_in*>(generic)->sin_port
                                                  : reinterpret_cast<sockaddr_in6*>(generic)->sin6_port);
    if (is_wildcard(generic)) warn_wildcard(host, listener.port, role);
    if (any_interface) {
      spdlog::warn("MASTER_ADDR '{}' resolves to a loopback address on this machine, which other "
                   "machines cannot reach: the rendezvous store listens on every interface of port "
                   "{} (set MASTER_ADDR to this machine's address on the job's network to listen "
                   "there only)",
                   host, listener.port);
    }
  }
  ::freeaddrinfo(found);
  if (listener.fd < 0) {
    const std::string reason = bind_reason(first_errno, host, port, role);
    if (first_errno == EADDRNOTAVAIL) {  // an address of another machine: bad input
      throw AddressError(fmt::format("{} cannot host the rendezvous store on {}:{}: {} (fix: {})",
                                     role.host_name, host, port, reason, role.addr_fix));
    }
    throw CommError(fmt::format("{} cannot host the rendezvous store on {}:{}: {} (fix: {})",
                                role.host_name, host, port, reason, role.port_fix));
  }
  return listener;
}

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }

/// Waits (until `deadline`) for the store's job identity and compares it with `job_id`. Throws
/// CommError when the store has none (not a ppctl job's store) or another job's.
void check_job_id(c10d::Store& store, const RendezvousInfo& info, const StoreRole& role,
                  Clock::time_point deadline) {
  const auto left = std::max(std::chrono::milliseconds(1),
                             std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  const std::string where = fmt::format("{}:{}", info.master_addr, info.master_port);
  try {
    store.wait({kJobIdKey}, left);
  } catch (const std::exception&) {
    if (info.agent_store) {
      throw CommTimeout(fmt::format(
          "rank {}: rank 0 published no ppctl job identity ({}) in torchrun's store at {} within the timeout: it "
          "has not started, failed before joining, or is late (fix: read rank 0's output; raise "
          "runtime.comm_timeout_s if it starts later)",
          info.rank, kJobIdKey, where));
    }
    throw CommError(fmt::format(
        "rank {}: the c10d store at {} published no ppctl job identity ({}) within the timeout: it "
        "is not this job's rendezvous store, another program holds port {} (fix: {})",
        info.rank, where, kJobIdKey, info.master_port, role.port_fix));
  }
  const auto value = store.get(kJobIdKey);
  const std::string theirs(value.begin(), value.end());
  if (theirs != info.job_id) {
    throw CommError(fmt::format(
        "rank {}: refusing the rendezvous store at {}: it belongs to another job (job id '{}'; "
        "this job's is '{}'), which holds port {} (fix: {})",
        info.rank, where, theirs, info.job_id, info.master_port, role.port_fix));
  }
}

}  // namespace

StoreRole store_role(LaunchMode mode) {
  if (mode == LaunchMode::Local) {
    return {"the launcher", "set runtime.master_port to a free port, or to 0 for any free port",
            "set runtime.master_addr to 127.0.0.1, or to this machine's own name or address; the "
            "local launcher hosts the store itself",
            "runtime.master_addr"};
  }
  return {"rank 0",
          "set MASTER_PORT to a free port of rank 0's machine, the same for every rank (under "
          "Slurm the default is 20000 + SLURM_JOB_ID mod 20000)",
          "set MASTER_ADDR to the host of rank 0, the same for every rank", "MASTER_ADDR"};
}

StorePtr host_store(const std::string& host, int port, int world_size,
                    std::chrono::milliseconds timeout, const std::string& job_id, LaunchMode mode) {
  const auto role = store_role(mode);
  const auto listener = listen_on(host, port, mode, role);
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(listener.port);
  options.isServer = true;
  options.numWorkers = static_cast<size_t>(world_size);
  options.waitWorkers = false;  // the others connect later
  options.timeout = timeout;
  options.masterListenFd = listener.fd;  // c10d takes the socket over
  StorePtr store;
  try {
    QuietC10dLog quiet;
    store = c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    throw CommError(fmt::format("{} cannot host the rendezvous store on {}:{}: {} (fix: {})",
                                role.host_name, host, listener.port, error_text(e), role.port_fix));
  }
  if (!job_id.empty()) store->set(kJobIdKey, bytes(job_id));
  return store;
}

c10::intrusive_ptr<c10d::Store> join_store(const RendezvousInfo& info, std::chrono::milliseconds timeout) {
  if (info.host_store) {
    return host_store(info.master_addr, info.master_port, info.world_size, timeout, info.job_id,
                      info.mode);
  }
  const auto role = store_role(info.mode);
  const auto deadline = Clock::now() + timeout;
  std::optional<c10::intrusive_ptr<c10d::Store>> store;
  std::string detail = "no answer";
  {
    QuietC10dLog quiet;
    try {
      // c10d's connect retries with a random delay past its timeout: our deadline is the bound, plus
      // a second for the identity check to report what it found.
      store = finish_by<c10::intrusive_ptr<c10d::Store>>(deadline + std::chrono::seconds(1), [info, timeout, deadline, role] {
        c10d::TCPStoreOptions options;
        options.port = static_cast<std::uint16_t>(info.master_port);
        options.isServer = false;
        options.numWorkers = static_cast<size_t>(info.world_size);
        options.waitWorkers = false;
        options.timeout = timeout;
        c10::intrusive_ptr<c10d::Store> joined = c10::make_intrusive<c10d::TCPStore>(info.master_addr, options);
        if (!info.store_prefix.empty()) joined = c10::make_intrusive<c10d::PrefixStore>(info.store_prefix, joined);
        if (info.agent_store && info.rank == 0 && !info.job_id.empty()) {
          joined->set(kJobIdKey, bytes(info.job_id));  // torchrun's agent hosts the store: rank 0 names the job
        } else if (!info.job_id.empty()) {
          check_job_id(*joined, info, role, deadline);
        }
        return joined;
      });
    } catch (const CommError&) {
      throw;
    } catch (const std::exception& e) {
      detail = error_text(e);
    }
    if (!store) quiet.stay_quiet();  // the join failed: this rank reports it and ends
  }
  if (store) return *store;
  const double seconds = std::chrono::duration<double>(timeout).count();
  throw CommTimeout(fmt::format(
      "rank {}: cannot join the rendezvous store at {}:{} within {:.0f} s ({}); {} hosts the store: "
      "it has not started or failed before hosting it, {}:{} does not lead to it, or another "
      "program holds port {} (fix: start {} with the same MASTER_ADDR and MASTER_PORT and read its "
      "output; if the port is taken, {}; raise runtime.comm_timeout_s if {} starts later)",
      info.rank, info.master_addr, info.master_port, seconds, detail, role.host_name,
      info.master_addr, info.master_port, info.master_port, role.host_name, role.port_fix,
      role.host_name));
}

namespace {
std::string joined_key(int rank) { return fmt::format("ppctl/joined/{}", rank); }
}  // namespace

void await_every_rank(c10d::Store& store, const RendezvousInfo& info, std::chrono::milliseconds timeout) {
  const auto key = joined_key;
  const auto deadline = Clock::now() + timeout;
  const char* count = info.mode == LaunchMode::Local  ? "the world size"
                      : info.mode == LaunchMode::Slurm ? "SLURM_NTASKS"
                                                       : "WORLD_SIZE";
  const std::string fix = fmt::format(
      "(fix: start every rank, 0 to {}, with the same MASTER_ADDR and MASTER_PORT; check that {} is the "
      "number of processes started; raise runtime.comm_timeout_s if ranks start later)",
      info.world_size - 1, count);
  std::vector<int> missing;
  for (int rank = 0; rank < info.world_size; ++rank)
    if (rank != info.rank) missing.push_back(rank);
  try {
    const QuietC10dLog quiet;  // a store that closes meanwhile is reported below, without c10d's backtrace
    std::array<char, 256> host{};
    if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
    store.set(key(info.rank), bytes(host[0] != '\0' ? host.data() : "unknown host"));
    while (!missing.empty()) {
      missing.erase(std::remove_if(missing.begin(), missing.end(),
                                   [&](int rank) { return store.check({key(rank)}); }),
                    missing.end());
      if (missing.empty() || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception& e) {
    // Typically rank 0, which hosts the store, gave up on the same missing ranks a moment earlier.
    throw CommError(fmt::format(
        "rank {}: the rendezvous store at {}:{} failed while the ranks joined ({}); {} had not joined by then "
        "(the store's host ends when its own wait runs out: see its output) {}",
        info.rank, info.master_addr, info.master_port, error_text(e), rank_list(missing), fix));
  }
  if (missing.empty()) return;
  throw CommTimeout(fmt::format("rank {}: {} never joined the rendezvous within runtime.comm_timeout_s = {:g} s "
                                "({} of {} joined; {} is {}) {}",
                                info.rank, rank_list(missing), std::chrono::duration<double>(timeout).count(),
                                info.world_size - static_cast<int>(missing.size()), info.world_size, count,
                                info.world_size, fix));
}

std::vector<std::string> rank_hosts(c10d::Store& store, const std::vector<int>& ranks) {
  std::vector<std::string> keys;
  for (int rank : ranks) keys.push_back(joined_key(rank));
  std::vector<std::string> hosts;
  for (const auto& value : store.multiGet(keys)) hosts.emplace_back(value.begin(), value.end());
  return hosts;
}

}  // namespace ppctl::comm
