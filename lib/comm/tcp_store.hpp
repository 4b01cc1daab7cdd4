// Creating the job's c10d TCPStore: hosting it on one interface only, joining it within the
// rendezvous timeout, and refusing a store that belongs to another job. Included by the comm .cpp
// files only (it pulls in the c10d headers).
#pragma once

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <string>

#include "comm/job_store.hpp"
#include "comm/launch_env.hpp"

namespace ppctl::comm {

/// The store key under which the store's host publishes the job identity (RendezvousInfo::job_id).
inline constexpr const char* kJobIdKey = "ppctl/job_id";

/// Who hosts a store and how a user changes its port, for messages.
struct StoreRole {
  std::string host_name;  ///< "rank 0" or "the launcher"
  std::string port_fix;   ///< e.g. "set MASTER_PORT to a free port for every rank"
  std::string addr_fix;   ///< how to name an address of the host's machine
  std::string addr_name;  ///< where the host's address comes from: "runtime.master_addr" or "MASTER_ADDR"
};

/// The role of the store's host in `mode` (Local: the launcher and runtime.master_port; torchrun and
/// Slurm: rank 0 and MASTER_PORT).
StoreRole store_role(LaunchMode mode);

/// Hosts the job's store on `host`:`port` (port 0: any free port) and publishes `job_id` under
/// kJobIdKey. The listening socket is bound to `host`'s address only (a loopback host listens on
/// loopback only), except when `host` is a name other than "localhost" that resolves to a loopback
/// address while `mode` is external (Debian maps the machine's own name to 127.0.1.1, which other
/// machines cannot reach): then on every interface, with a warning. The socket is handed to c10d
/// (TCPStoreOptions::masterListenFd); the store protocol is c10d's.
/// Throws ppctl::CommError naming host:port, why it failed (`host` does not resolve or is not an
/// address of this machine: role.addr_fix; the port is in use: role.port_fix).
c10::intrusive_ptr<c10d::TCPStore> host_store(const std::string& host, int port, int world_size,
                                              std::chrono::milliseconds timeout,
                                              const std::string& job_id, LaunchMode mode);

/// Joins (or, when info.host_store, hosts) the store at info.master_addr:info.master_port as rank
/// info.rank and checks its job identity against info.job_id (no check when empty). With
/// info.agent_store (torchrun's agent hosts it) the result is the store under info.store_prefix, and
/// rank 0 publishes the identity instead of checking it. Everything —
/// connecting, c10d's own retries, waiting for the identity — ends within `timeout` (c10d's log lines
/// and backtraces are kept off the terminal meanwhile). Throws ppctl::CommTimeout when no store
/// answered in time (naming host:port, which process hosts the store, and the fixes), ppctl::CommError
/// when the store belongs to another job or is not a ppctl store, or when hosting fails (host_store).
c10::intrusive_ptr<c10d::Store> join_store(const RendezvousInfo& info, std::chrono::milliseconds timeout);

/// The first wait of a job: sets this rank's key "ppctl/joined/<rank>" in `store` (its value: this
/// machine's host name, for rank_hosts) and waits, polling,
/// until every rank of info.world_size has set its own, or `timeout` passes. Throws
/// ppctl::CommTimeout naming the ranks that never joined, compressed ("rank 1", "ranks 1-7"), the
/// timeout (runtime.comm_timeout_s) and the fix (start every rank; check WORLD_SIZE / SLURM_NTASKS).
/// Ranks then build their process groups knowing every peer is there, so c10d's own waits (whose
/// message names only store keys) do not time out for this reason.
void await_every_rank(c10d::Store& store, const RendezvousInfo& info, std::chrono::milliseconds timeout);

/// The host names that `ranks` (global ranks, all joined: after await_every_rank) published in
/// `store`, in the same order, read in one request (multiGet). Messages about a peer name its host
/// with it, so that a lost node is recognisable. Throws what c10d throws when the store fails.
std::vector<std::string> rank_hosts(c10d::Store& store, const std::vector<int>& ranks);

/// What a JobStore holds: the c10d store join_store returned and who joined it.
struct JobStore::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  RendezvousInfo info;
};

}  // namespace ppctl::comm
