// One connection to the job's rendezvous store (c10d TCPStore) that a worker makes once and shares:
// the run directory's path is exchanged over it before the process groups are built on it. The
// header is torch-free; the c10d store is in comm/tcp_store.hpp (JobStore::Impl).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "comm/launch_env.hpp"

namespace ppctl::comm {

/// The job's store as this rank joined it (or, rank 0 under torchrun or Slurm, hosts it).
class JobStore {
 public:
  /// join_store(info, timeout) (comm/tcp_store.hpp): connects, or hosts when info.host_store, and
  /// checks the job identity; bounded by `timeout`. Same errors as join_store.
  JobStore(const RendezvousInfo& info, std::chrono::milliseconds timeout);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  /// Sets `key` to `value`. Throws ppctl::CommError when the store cannot be written.
  void set(const std::string& key, const std::string& value);

  /// The value of `key`, waiting (polling) until another rank sets it or `timeout` passes; nullopt
  /// then. Throws ppctl::CommError when the store fails meanwhile (e.g. its host, rank 0, exited).
  std::optional<std::string> wait_get(const std::string& key, std::chrono::milliseconds timeout);

  /// Who joined, and where.
  const RendezvousInfo& info() const;

  struct Impl;  ///< defined in comm/tcp_store.hpp (holds the c10d store)
  /// For comm/ .cpp files: the c10d store (Communicator::create_groups builds its groups on it).
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ppctl::comm
