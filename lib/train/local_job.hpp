// Running a job's workers on this machine: host the rendezvous store, spawn, supervise.
#pragma once

#include <string>
#include <vector>

#include "config/job_spec.hpp"
#include "launch/launcher.hpp"

namespace ppctl::train {

/// Hosts the job's TCPStore on runtime.master_addr (runtime.master_port; 0 = any free port), then
/// starts `world_size` workers `EXECUTABLE worker SPEC_PATH EXTRA_ARGS...` with launch::run_workers
/// and waits for them. `extra_env` is added to the workers' environment. `spec_path` is made absolute. Returns how the job ended (see run_workers).
/// Throws ppctl::CommError if the store cannot be hosted, ppctl::LaunchError if a worker cannot start.
launch::LaunchResult run_local_job(const config::JobSpec& spec, int world_size,
                                   const std::string& executable, const std::string& spec_path,
                                   const std::vector<std::string>& extra_args,
                                   const std::vector<std::pair<std::string, std::string>>& extra_env = {});

}  // namespace ppctl::train
