// How this process was started (local launcher, torchrun-style variables, Slurm) and its rendezvous
// identity, read from an environment map by pure functions. No torch.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ppctl::comm {

/// The tasks on each node in Slurm's tasks-per-node syntax ("4", "4(x2),3", "2(x3)"), node by node ("4(x2),3" ->
/// 4, 4, 3); unset when `text` is not in that syntax or a count or repeat is 0.
std::optional<std::vector<int>> parse_tasks_per_node(const std::string& text);

/// Who started `ppctl train`.
enum class LaunchMode {
  Local,     ///< nobody: ppctl's own launcher spawns the workers
  Torchrun,  ///< RANK / WORLD_SIZE (torchrun, or set by hand): this process is one worker
  Slurm,     ///< SLURM_PROCID / SLURM_NTASKS (`srun ppctl train`): this process is one worker
};

/// A worker's identity and the store's address.
struct RendezvousInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  /// Workers on each node, when the launcher says: torchrun's LOCAL_WORLD_SIZE (the same on every node), Slurm's
  /// SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE when it sums to SLURM_NTASKS); empty otherwise.
  std::vector<int> ranks_per_node;
  std::string ranks_per_node_source;  ///< the variable and its value, for messages: "SLURM_STEP_TASKS_PER_NODE=3,1"
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  /// True when this process hosts the c10d TCPStore (rank 0 under torchrun or Slurm); false when
  /// the local launcher hosts it.
  bool host_store = false;
  /// Who started the job: Local (the launcher hosts the store) or an external mode (rank 0 does).
  LaunchMode mode = LaunchMode::Local;
  /// The job's identity, the same on every rank and different for every other job: the store's
  /// host publishes it under kJobIdKey and every other rank refuses a store whose value differs.
  /// Empty: no check (a worker started by hand without PPCTL_JOB_ID).
  std::string job_id;
  /// Torchrun's agent hosts the store at MASTER_ADDR:MASTER_PORT (it sets
  /// TORCHELASTIC_USE_AGENT_STORE=True): every rank joins it as a client (host_store false), rank 0
  /// publishes the job identity instead of checking it, and every key lives under store_prefix.
  bool agent_store = false;
  /// Prefix of every key of this job in the store ("/worker/attempt_<TORCHELASTIC_RESTART_COUNT>"
  /// with an agent store, as torch.distributed uses it, so a restarted attempt never sees the keys
  /// of an earlier one); empty otherwise.
  std::string store_prefix;
};

/// Environment variable through which the local launcher hands its workers the job identity (a
/// random nonce per start); in external modes it overrides the derived identity (external_identity).
inline constexpr const char* kJobIdVariable = "PPCTL_JOB_ID";

/// Environment variables by name (a test passes its own; environment_map() reads the process's).
using EnvMap = std::map<std::string, std::string>;

/// The process's environment as an EnvMap.
EnvMap environment_map();

/// "local", "torchrun" or "slurm".
std::string to_string(LaunchMode mode);

/// Torchrun when RANK or WORLD_SIZE is set (they win inside a Slurm allocation: torchrun under srun
/// spawned this process); else Slurm when SLURM_PROCID and SLURM_STEP_ID are set (srun sets them per
/// task; an sbatch script itself has SLURM_PROCID but no step id); else Local.
LaunchMode detect_launch_mode(const EnvMap& env);

/// The TCP port a Slurm job without MASTER_PORT rendezvouses on: 20000 + SLURM_JOB_ID mod 20000,
/// so every task of a job computes the same port and concurrent jobs rarely collide.
int slurm_port(long long job_id);

/// The identity of a worker started by torchrun-style variables or by Slurm (`mode` != Local):
/// - Torchrun: RANK, WORLD_SIZE (both required), LOCAL_RANK (default 0), MASTER_ADDR, MASTER_PORT
///   (both required);
/// - Slurm: SLURM_PROCID, SLURM_NTASKS (required), SLURM_LOCALID (default 0); MASTER_ADDR, else the
///   first host of SLURM_JOB_NODELIST (or SLURM_NODELIST), expanded (hostlist.hpp); MASTER_PORT,
///   else slurm_port(SLURM_JOB_ID).
/// Rank 0 hosts the store (host_store), unless torchrun's agent does (TORCHELASTIC_USE_AGENT_STORE=True:
/// agent_store, store_prefix). job_id: PPCTL_JOB_ID when set; else, under Slurm,
/// "slurm job J step S world N" (SLURM_JOB_ID, SLURM_STEP_ID); under torchrun, "torchrun run R
/// restart K world N" (TORCHELASTIC_RUN_ID, default "none"; TORCHELASTIC_RESTART_COUNT, default 0).
/// The caller appends the spec's fingerprint (job::job_fingerprint), so two jobs differ when
/// their ids or their specs do. Throws ppctl::CommError naming the variable and its value
/// when one is missing, not an integer, out of range (rank >= world size, port outside
/// [1, 65535]), or when both a Slurm node list and MASTER_ADDR are absent.
RendezvousInfo external_identity(const EnvMap& env, LaunchMode mode);

/// The identity of a worker the local launcher started (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
/// MASTER_PORT, all set by the launcher, which hosts the store; job_id from PPCTL_JOB_ID, empty when
/// unset). Same errors as external_identity.
RendezvousInfo local_worker_identity(const EnvMap& env);

}  // namespace ppctl::comm
