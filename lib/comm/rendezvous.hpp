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
  /// Listens on `host`:`port`; port 0 picks a free port (read it back with port()).
  /// Throws ppctl::CommError when the port cannot be bound.
  StoreServer(const std::string& host, int port, int world_size, std::chrono::milliseconds timeout);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// The port actually bound.
  int port() const;

  /// Non-blocking read of a key the workers set (e.g. comm::progress_key(rank)); nullopt when
  /// unset. Throws ppctl::CommError when the store cannot be read.
  std::optional<std::string> try_get(const std::string& key) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ppctl::comm
