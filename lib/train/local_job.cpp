// Local job: rendezvous store plus supervised worker processes.
#include "train/local_job.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>

#include "comm/rendezvous.hpp"

namespace ppctl::train {

launch::LaunchResult run_local_job(const config::JobSpec& spec, int world_size,
                                   const std::string& executable, const std::string& spec_path,
                                   const std::vector<std::string>& extra_args,
                                   const std::vector<std::pair<std::string, std::string>>& extra_env) {
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(spec.runtime.comm_timeout_s * 1000.0));
  comm::StoreServer store(spec.runtime.master_addr, static_cast<int>(spec.runtime.master_port),
                          world_size, timeout);
  launch::LaunchOptions options;
  options.world_size = world_size;
  options.argv = {executable, "worker", std::filesystem::absolute(spec_path).string()};
  options.argv.insert(options.argv.end(), extra_args.begin(), extra_args.end());
  options.extra_env = extra_env;
  options.extra_env.emplace_back(comm::kJobIdVariable, store.job_id());
  options.master_addr = spec.runtime.master_addr;
  options.master_port = store.port();
  spdlog::info("rendezvous store on {}:{}; starting {} workers", options.master_addr,
               options.master_port, world_size);
  return launch::run_workers(options);
}

}  // namespace ppctl::train
