// Rendezvous: who this process is (rank, world size) and where the job's TCPStore lives.
// The launcher hosts the store (StoreServer); workers read their identity from the environment.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "comm/launch_env.hpp"

namespace ppctl::comm {

/// A worker the local launcher started: local_worker_identity(environment_map()) (RANK,
/// WORLD_SIZE, LOCAL_RANK (default 0), MASTER_ADDR and MASTER_PORT). Throws ppctl::CommError naming
/// the variable when one is missing, not an integer, or out of range.
RendezvousInfo rendezvous_from_env();

/// A TCPStore server hosted by the launcher, so workers never reach the store before it exists.
class StoreServer {
 public:
  /// Listens on `host`:`port` only (loopback for 127.0.0.1; comm/tcp_store.hpp); port 0 picks a
  /// free port (read it back with port()). Publishes a new random job identity (job_id()), which
  /// the workers must get as PPCTL_JOB_ID. Throws ppctl::CommError when `host` is not an address
  /// of this machine or the port cannot be bound (naming runtime.master_addr / master_port).
  StoreServer(const std::string& host, int port, int world_size, std::chrono::milliseconds timeout);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// The port actually bound.
  int port() const;

  /// The job identity this store publishes (a random nonce, new for every StoreServer): pass it to
  /// the workers as PPCTL_JOB_ID (kJobIdVariable); they refuse a store whose identity differs.
  const std::string& job_id() const;
  /// Non-blocking read of a key the workers set (e.g. comm::progress_key(rank)); nullopt when
  /// unset. Throws ppctl::CommError when the store cannot be read.
  std::optional<std::string> try_get(const std::string& key) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ppctl::comm
