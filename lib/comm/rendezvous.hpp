// Rendezvous: who this process is (rank, world size) and where the job's TCPStore lives.
// The launcher hosts the store (StoreServer); workers read their identity from the environment.
#pragma once

#include <chrono>
#include <memory>
#include <string>

namespace ppctl::comm {

/// A worker's identity and the store's address.
struct RendezvousInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
};

/// Reads RANK, WORLD_SIZE, LOCAL_RANK (default 0), MASTER_ADDR and MASTER_PORT.
/// Throws ppctl::CommError naming the variable when one is missing, not an integer, or out of range
/// (rank outside [0, world size), port outside [1, 65535]).
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

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ppctl::comm
