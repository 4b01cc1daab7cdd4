// Launch-mode detection and worker identity from environment variables (see launch_env.hpp).
#include "comm/launch_env.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

#include "comm/hostlist.hpp"
#include "core/error.hpp"
#include "core/integer_text.hpp"

extern char** environ;

namespace ppctl::comm {
namespace {

std::optional<std::string> lookup(const EnvMap& env, const std::string& name) {
  const auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

/// The integer in `name`, in [min, max]; `fallback` when unset (an error when there is none).
long long env_int(const EnvMap& env, const std::string& name, std::optional<long long> fallback,
                  long long min, long long max, const std::string& how_to_set) {
  const auto text = lookup(env, name);
  if (!text) {
    if (fallback) return *fallback;
    throw CommError(fmt::format("environment variable {} is not set (fix: {})", name, how_to_set));
  }
  // One spelling, as in the spec: `RANK=00` or `WORLD_SIZE=+1` are refused, not read as 0 and 1.
  const auto value = core::parse_plain_integer(*text);
  if (!value || *value < min || *value > max) {
    throw CommError(fmt::format("environment variable {}='{}' must be an integer in [{}, {}], written in plain "
                                "decimal digits (fix: {})",
                                name, *text, min, max, how_to_set));
  }
  return *value;
}

constexpr const char* kTorchrunHint =
    "set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT for every worker as torchrun does, or unset "
    "them all to let `ppctl train` spawn its workers itself";
constexpr const char* kSlurmHint =
    "start workers with `srun ppctl train`, which sets SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID "
    "per task";

/// MASTER_ADDR when set and non-empty; else, under Slurm, the first host of the job's node list.
std::string master_addr(const EnvMap& env, LaunchMode mode) {
  if (auto addr = lookup(env, "MASTER_ADDR")) {
    if (addr->empty()) {
      throw CommError("environment variable MASTER_ADDR is empty (fix: set it to the host of rank "
                      "0, which hosts the rendezvous store)");
    }
    return *addr;
  }
  if (mode == LaunchMode::Slurm) {
    for (const char* name : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      if (auto list = lookup(env, name)) return expand_hostlist(*list, name).front();
    }
    throw CommError("neither MASTER_ADDR nor SLURM_JOB_NODELIST / SLURM_NODELIST is set (fix: set "
                    "MASTER_ADDR to the first host of the job, as scripts/slurm/*.sbatch do)");
  }
  throw CommError(fmt::format("environment variable MASTER_ADDR is not set (fix: {})", kTorchrunHint));
}

int master_port(const EnvMap& env, LaunchMode mode) {
  const std::string hint = mode == LaunchMode::Slurm
                               ? "set MASTER_PORT, or run inside a Slurm job (SLURM_JOB_ID)"
                               : kTorchrunHint;
  if (mode == LaunchMode::Slurm && !lookup(env, "MASTER_PORT")) {
    return slurm_port(env_int(env, "SLURM_JOB_ID", std::nullopt, 0, (1LL << 62), hint));
  }
  return static_cast<int>(env_int(env, "MASTER_PORT", std::nullopt, 1, 65535, hint));
}

RendezvousInfo torchrun_identity(const EnvMap& env, const std::string& hint) {
  RendezvousInfo info;
  info.world_size = static_cast<int>(env_int(env, "WORLD_SIZE", std::nullopt, 1, 1 << 20, hint));
  info.rank = static_cast<int>(env_int(env, "RANK", std::nullopt, 0, info.world_size - 1, hint));
  info.local_rank =
      static_cast<int>(env_int(env, "LOCAL_RANK", 0, 0, info.world_size - 1, hint));
  if (const auto local = lookup(env, "LOCAL_WORLD_SIZE")) {
    info.ranks_per_node = {static_cast<int>(env_int(env, "LOCAL_WORLD_SIZE", std::nullopt, 1, info.world_size, hint))};
    info.ranks_per_node_source = "LOCAL_WORLD_SIZE=" + *local;
  }
  info.master_addr = master_addr(env, LaunchMode::Torchrun);
  info.master_port = master_port(env, LaunchMode::Torchrun);
  return info;
}

/// External modes: PPCTL_JOB_ID when set, else what the launcher (Slurm, torchrun) tells its tasks
/// of one job apart from another's with.
std::string external_job_id(const EnvMap& env, LaunchMode mode, int world_size) {
  if (auto id = lookup(env, kJobIdVariable)) return *id;
  const auto get = [&](const char* name, const char* fallback) {
    return lookup(env, name).value_or(fallback);
  };
  if (mode == LaunchMode::Slurm) {
    return fmt::format("slurm job {} step {} world {}", get("SLURM_JOB_ID", "?"),
                       get("SLURM_STEP_ID", "?"), world_size);
  }
  return fmt::format("torchrun run {} restart {} world {}", get("TORCHELASTIC_RUN_ID", "none"),
                     get("TORCHELASTIC_RESTART_COUNT", "0"), world_size);
}

/// Slurm's tasks per node into info.ranks_per_node: SLURM_STEP_TASKS_PER_NODE (this job step's), which must list
/// SLURM_NTASKS tasks; else SLURM_TASKS_PER_NODE (the allocation's), used only when it lists exactly the step's
/// tasks. A value not in Slurm's syntax, or a step list that contradicts SLURM_NTASKS, is refused naming it.
void slurm_tasks_per_node(const EnvMap& env, RendezvousInfo& info) {
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    const auto text = lookup(env, name);
    if (!text) continue;
    const auto nodes = parse_tasks_per_node(*text);
    if (!nodes) {
      throw CommError(fmt::format("environment variable {}='{}' is not Slurm's list of tasks per node (counts above 0 "
                                  "as N or N(xK), comma-separated, e.g. 4(x2),3) (fix: {})",
                                  name, *text, kSlurmHint));
    }
    int64_t tasks = 0;
    for (const int n : *nodes) tasks += n;
    const bool step = std::string(name) == "SLURM_STEP_TASKS_PER_NODE";
    if (tasks != info.world_size) {
      if (!step) return;  // the allocation's layout, not this step's: unknown, nothing checked
      throw CommError(fmt::format("environment variable {}='{}' lists {} tasks but SLURM_NTASKS is {} (fix: {})", name,
                                  *text, tasks, info.world_size, kSlurmHint));
    }
    info.ranks_per_node = *nodes;
    info.ranks_per_node_source = fmt::format("{}={}", name, *text);
    return;
  }
}

}  // namespace

EnvMap environment_map() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::string to_string(LaunchMode mode) {
  switch (mode) {
    case LaunchMode::Local: return "local";
    case LaunchMode::Torchrun: return "torchrun";
    case LaunchMode::Slurm: return "slurm";
  }
  return "?";
}

std::optional<std::vector<int>> parse_tasks_per_node(const std::string& text) {
  std::vector<int> nodes;
  // A run of up to 6 digits at `at` (advanced past it) as a positive count; unset otherwise.
  const auto number = [&text](size_t& at) -> std::optional<int> {
    const size_t start = at;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])) != 0) ++at;
    if (at == start || at - start > 6) return std::nullopt;
    const int value = std::stoi(text.substr(start, at - start));
    return value > 0 ? std::optional<int>(value) : std::nullopt;
  };
  size_t at = 0;
  while (true) {  // entries "N" or "N(xK)", comma-separated
    const auto count = number(at);
    if (!count) return std::nullopt;
    int repeat = 1;
    if (text.compare(at, 2, "(x") == 0) {
      at += 2;
      const auto times = number(at);
      if (!times || at >= text.size() || text[at] != ')' || nodes.size() + static_cast<size_t>(*times) > 100000) {
        return std::nullopt;
      }
      repeat = *times;
      ++at;
    }
    nodes.insert(nodes.end(), static_cast<size_t>(repeat), *count);
    if (at == text.size()) return nodes;
    if (text[at] != ',') return std::nullopt;
    ++at;
  }
}

LaunchMode detect_launch_mode(const EnvMap& env) {
  if (env.count("RANK") || env.count("WORLD_SIZE")) return LaunchMode::Torchrun;
  // srun sets SLURM_STEP_ID for each job step; an sbatch script itself (the batch step) has
  // SLURM_PROCID=0 but no SLURM_STEP_ID: `ppctl train` there launches locally.
  if (env.count("SLURM_PROCID") && env.count("SLURM_STEP_ID")) return LaunchMode::Slurm;
  return LaunchMode::Local;
}

int slurm_port(long long job_id) { return 20000 + static_cast<int>(job_id % 20000); }

RendezvousInfo external_identity(const EnvMap& env, LaunchMode mode) {
  RendezvousInfo info;
  if (mode == LaunchMode::Slurm) {
    info.world_size =
        static_cast<int>(env_int(env, "SLURM_NTASKS", std::nullopt, 1, 1 << 20, kSlurmHint));
    info.rank = static_cast<int>(
        env_int(env, "SLURM_PROCID", std::nullopt, 0, info.world_size - 1, kSlurmHint));
    info.local_rank =
        static_cast<int>(env_int(env, "SLURM_LOCALID", 0, 0, info.world_size - 1, kSlurmHint));
    slurm_tasks_per_node(env, info);
    info.master_addr = master_addr(env, mode);
    info.master_port = master_port(env, mode);
  } else if (mode == LaunchMode::Torchrun) {
    info = torchrun_identity(env, kTorchrunHint);
  } else {
    throw InternalError("external_identity called for a local launch");
  }
  info.host_store = info.rank == 0;
  if (mode == LaunchMode::Torchrun && lookup(env, "TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True") {
    info.host_store = false;  // torchrun's agent holds MASTER_PORT
    info.agent_store = true;
    info.store_prefix = fmt::format("/worker/attempt_{}", lookup(env, "TORCHELASTIC_RESTART_COUNT").value_or("0"));
  }
  info.mode = mode;
  info.job_id = external_job_id(env, mode, info.world_size);
  return info;
}

RendezvousInfo local_worker_identity(const EnvMap& env) {
  auto info = torchrun_identity(
      env, "start workers with `ppctl train`, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
           "as torchrun does");
  info.job_id = lookup(env, kJobIdVariable).value_or("");
  return info;
}

}  // namespace ppctl::comm
